"""`manage.py setup_models`: prepare the bundled models (SmolLM2-135M-Instruct, all-MiniLM-L6-v2) under var/."""
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from models_llm.bundled import BundledModelError, minilm_folder, smollm2_folder


class Command(BaseCommand):
    help = "Verify the bundled model packages and convert SmolLM2's GGUF once into a transformers folder."

    def handle(self, *args, **options) -> None:
        try:
            smollm2 = smollm2_folder(settings.VAR_DIR)
            minilm = minilm_folder()
        except BundledModelError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"SmolLM2-135M-Instruct: {smollm2}\nall-MiniLM-L6-v2: {minilm}")

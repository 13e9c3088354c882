"""Arguments that several management commands read the same way."""
from __future__ import annotations

from django.core.management.base import CommandError


def parse_mix(text: str) -> dict[str, float]:
    """A queue mix written `uncertain=80,random=20`, as {strategy: share} (the strategies and shares are checked by
    the service that takes the mix); CommandError naming a part that is not STRATEGY=SHARE."""
    mix = {}
    for part in text.split(","):
        name, _, share = part.partition("=")
        try:
            mix[name.strip()] = float(share)
        except ValueError:
            raise CommandError(f"--mix {text!r}: each part is STRATEGY=SHARE, e.g. uncertain=80,random=20; "
                               f"{part!r} is not") from None
    return mix

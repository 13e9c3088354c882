"""kombu's filesystem transport (the zero-server broker) with messages written atomically.

kombu 5.7 creates a message file under its final name and then writes it, while a consumer takes any file with
that name (it moves it away without a lock): a worker polling at that moment reads an empty file, fails with
"JSONDecodeError: Expecting value" and the task is lost (celery/kombu#1551). Here a message is written under a
name consumers skip and renamed into place once complete; a rename within one folder is atomic, so a consumer
sees a whole message or none."""
from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# Consumers take only the names whose text after the first "." is "<queue>.msg": ".partial-<uuid>" never is.
PARTIAL_PREFIX = ".partial-"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put `payload` on `queue`: written in full under a partial name, then renamed to its message name."""
        final = os.path.join(self.data_folder_out, f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg")
        partial = os.path.join(self.data_folder_out, f"{PARTIAL_PREFIX}{uuid.uuid4()}")
        try:
            with open(partial, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            try:
                os.unlink(partial)
            except OSError:
                pass
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel

    @property
    def default_connection_params(self) -> dict:
        # Folders have no host: kombu's virtual default ("localhost") only made every command that queues a task
        # print "No hostname was supplied. Reverting to default 'localhost'".
        return {"port": self.default_port}

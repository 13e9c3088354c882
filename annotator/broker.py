"""kombu's filesystem transport (the zero-server broker) with messages and exchange tables written atomically.

kombu 5.7 creates a message file under its final name and then writes it, while a consumer takes any file with
that name (it moves it away without a lock): a worker polling at that moment reads an empty file, fails with
"JSONDecodeError: Expecting value" and the task is lost (celery/kombu#1551). Here a message is written under a
name consumers skip and renamed into place once complete; a rename within one folder is atomic, so a consumer
sees a whole message or none.

Consumers take the messages of a queue in the order of their names, which kombu sorts as text. kombu names them by
the milliseconds since the machine booted, so when that count gained a digit (10,000,000 ms: 2 h 47 min after boot;
again at 27 h 47 min) every newer message sorted before the older ones: a scoring job whose chunks were sent just
before waited, "queued (next)", while the jobs sent after it ran, until the sweep sent its chunks again (issue #48).
Here the clock is counted in microseconds at a fixed width, so names sort in the order the messages were put.

An exchange's table of queues has the same race: kombu creates the file empty, then locks and writes it, and a
process binding a queue to the same exchange in between reads an empty table and fails. `make demo` starts two
workers at once on a fresh folder, and one of them died so ("Unrecoverable error: JSONDecodeError"), stopping the
demo. Here the table file comes into being whole (an empty table, linked into place), and kombu then adds each
queue under its lock."""
from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# Digits of the microseconds since boot in a message's name: 317 years.
CLOCK_DIGITS = 16


def message_clock() -> str:
    """The time a message is put, as the start of its name: microseconds since boot (one machine's folders share
    one clock), zero-padded so that text order is time order."""
    return f"{round(monotonic() * 1_000_000):0{CLOCK_DIGITS}d}"


# Consumers take only the names whose text after the first "." is "<queue>.msg": ".partial-<uuid>" never is.
PARTIAL_PREFIX = ".partial-"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put `payload` on `queue`: written in full under a partial name, then renamed to its message name."""
        final = os.path.join(self.data_folder_out, f"{message_clock()}_{uuid.uuid4()}.{queue}.msg")
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


    def _queue_bind(self, exchange, routing_key, pattern, queue):
        """kombu's, once the exchange's table file exists: created whole, by whichever process links it first."""
        table = self._exchange_file(exchange)
        if not table.exists():
            self.control_folder.mkdir(exist_ok=True)
            partial = self.control_folder / f"{PARTIAL_PREFIX}{uuid.uuid4()}"
            try:
                partial.write_bytes(str_to_bytes(dumps([])))
                os.link(partial, table)
            except FileExistsError:
                pass  # another process created it meanwhile: kombu adds this queue to that one's table
            except OSError as exc:
                raise ChannelError(f"Cannot open {table}") from exc
            finally:
                partial.unlink(missing_ok=True)
        super()._queue_bind(exchange, routing_key, pattern, queue)


class Transport(filesystem.Transport):
    Channel = Channel

    @property
    def default_connection_params(self) -> dict:
        # Folders have no host: kombu's virtual default ("localhost") only made every command that queues a task
        # print "No hostname was supplied. Reverting to default 'localhost'".
        return {"port": self.default_port}

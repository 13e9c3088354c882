"""annotator/broker.py: the zero-server broker never hands a worker half a message. kombu's own filesystem
transport creates the message file before writing it, and a worker polling in between read an empty file
("JSONDecodeError: Expecting value") and lost the task; here a consumer polling mid-write finds nothing, and then
the whole message."""
from __future__ import annotations

import os
from queue import Empty

import pytest
from kombu import Connection
from kombu.exceptions import ChannelError

import annotator.broker as broker
from annotator.broker import Transport


@pytest.fixture
def channel(tmp_path):
    folders = {name: tmp_path / name for name in ("queue", "processed", "control")}
    for folder in folders.values():
        folder.mkdir()
    options = {"data_folder_in": str(folders["queue"]), "data_folder_out": str(folders["queue"]),
               "processed_folder": str(folders["processed"]), "control_folder": str(folders["control"])}
    with Connection("filesystem://", transport=Transport, transport_options=options) as connection:
        yield connection.default_channel


def test_a_consumer_polling_while_a_message_is_written_finds_nothing_then_all_of_it(channel, monkeypatch):
    seen_mid_write = []
    real = broker.str_to_bytes

    def write_while_polled(text):
        # The file is open under its partial name here: the race window of kombu's own transport.
        seen_mid_write.append(sorted(os.listdir(channel.data_folder_in)))
        with pytest.raises(Empty):
            channel._get("celery")
        return real(text)

    monkeypatch.setattr(broker, "str_to_bytes", write_while_polled)
    channel._put("celery", {"body": "x" * 100_000, "task": "labeling.tasks.definition_draft_task"})
    (names,) = seen_mid_write
    assert len(names) == 1 and names[0].startswith(broker.PARTIAL_PREFIX)

    assert channel._size("celery") == 1
    message = channel._get("celery")
    assert message == {"body": "x" * 100_000, "task": "labeling.tasks.definition_draft_task"}
    assert os.listdir(channel.data_folder_in) == []  # nothing partial left behind


def test_each_message_reaches_its_own_queue_once(channel):
    for number in range(3):
        channel._put("celery", {"n": number})
    channel._put("other", {"n": "elsewhere"})
    assert sorted(channel._get("celery")["n"] for _ in range(3)) == [0, 1, 2]  # same-millisecond order is free
    with pytest.raises(Empty):
        channel._get("celery")
    assert channel._get("other") == {"n": "elsewhere"}


def test_messages_come_out_in_the_order_they_were_put_when_the_clock_gains_a_digit(channel, monkeypatch):
    # 9,999.9 s after boot, then 10,000.1 s: kombu's millisecond count went from 7 digits to 8, and its names, sorted
    # as text, handed out the newer message first.
    for number, seconds in enumerate((9_999.9, 10_000.1, 10_000.2)):
        monkeypatch.setattr(broker, "monotonic", lambda seconds=seconds: seconds)
        channel._put("celery", {"n": number})
    assert [channel._get("celery")["n"] for _ in range(3)] == [0, 1, 2]


def test_a_folder_that_cannot_be_written_is_a_channel_error_naming_the_message(channel, tmp_path):
    channel.data_folder_out = str(tmp_path / "missing")
    with pytest.raises(ChannelError, match=r"Cannot add file '.*missing/\d+_[0-9a-f-]+\.celery\.msg' to directory"):
        channel._put("celery", {"n": 1})


def test_the_app_uses_it_when_the_broker_is_a_folder():
    from annotator.celery import app

    if not app.conf.broker_url.startswith("filesystem://"):
        pytest.skip("the broker is Redis here")
    with app.connection_for_write() as connection:
        assert isinstance(connection.transport, Transport)


def test_a_connection_to_the_folders_names_no_host_and_logs_no_warning(tmp_path, caplog):
    # kombu's own filesystem transport logs "No hostname was supplied" on each clone of the connection, which
    # every command that queues a task printed.
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path)}
    with caplog.at_level("WARNING", logger="kombu.connection"):
        Connection("filesystem://", transport=Transport, transport_options=options).clone().close()
    assert "hostname" not in caplog.text


def test_two_workers_binding_queues_to_a_new_exchange_at_once_both_bind(channel, monkeypatch):
    """`make demo` starts two workers on a fresh folder: each binds its queue to the same control exchange. With
    kombu's own transport the second read the table the first had created and not yet written, and died."""
    from kombu.transport import filesystem

    other = channel.connection.create_channel(channel.connection)
    real_lock = filesystem.lock
    raced = []

    def the_other_binds_first(handle, flags):
        if not raced:
            raced.append(True)
            other._queue_bind("celery.pidbox", "", "", "bulk@vm.celery.pidbox")
        real_lock(handle, flags)

    monkeypatch.setattr(filesystem, "lock", the_other_binds_first)
    channel._queue_bind("celery.pidbox", "", "", "interactive@vm.celery.pidbox")
    assert raced
    assert {row.queue for row in channel.get_table("celery.pidbox")} == {
        "interactive@vm.celery.pidbox", "bulk@vm.celery.pidbox"}
    assert [name for name in os.listdir(channel.control_folder) if name.startswith(broker.PARTIAL_PREFIX)] == []

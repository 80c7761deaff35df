"""What the live feed uses of django-eventstream (docs/DECISIONS.md): a per-process listener
registry by channel, with bounded queues, an overflow flag and a thread-safe wake-up. Not in
the package's top-level exports, so a new version that moves it fails here, not in
production."""

import asyncio
import threading

from django_eventstream.event import Event
from django_eventstream.views import Listener, get_listener_manager


def test_a_listener_registered_on_a_channel_is_woken_from_another_thread_and_flags_overflow():
    async def scenario():
        listener = Listener()
        listener.assign_loop()
        listener.channels = {"pair-test-interface"}
        manager = get_listener_manager()
        manager.add_listener(listener)
        try:
            publisher = threading.Thread(target=lambda: [
                manager.add_to_queues("pair-test-interface", Event("pair-test-interface", "bar", {"n": n}))
                for n in range(200)])
            publisher.start()
            await asyncio.wait_for(listener.aevent.wait(), 5)
            publisher.join()
            items = listener.channel_items["pair-test-interface"]
            assert [item.data["n"] for item in items] == list(range(len(items)))
            assert len(items) < 200 and listener.overflow  # bounded: a slow reader is flagged
            manager.add_to_queues("other-channel", Event("other-channel", "bar", {}))
            assert "other-channel" not in listener.channel_items
        finally:
            manager.remove_listener(listener)
        assert "pair-test-interface" not in manager.listeners_by_channel

    asyncio.run(scenario())


def test_a_stream_listener_is_woken_on_its_own_loop_without_the_loops_wake_up_pipe():
    from streaming.sse import StreamListener

    async def scenario():
        loop = asyncio.get_running_loop()
        listener = StreamListener()
        listener.assign_loop()
        listener.channels = {"pair-test-wake"}
        manager = get_listener_manager()
        manager.add_listener(listener)
        threadsafe_calls = []
        original = loop.call_soon_threadsafe
        loop.call_soon_threadsafe = lambda *args: threadsafe_calls.append(args) or original(*args)
        try:
            manager.add_to_queues("pair-test-wake", Event("pair-test-wake", "bar", {"n": 1}))  # on the loop
            assert listener.aevent.is_set() and not threadsafe_calls
            listener.aevent.clear()
            publisher = threading.Thread(target=manager.add_to_queues,  # from another thread
                                         args=("pair-test-wake", Event("pair-test-wake", "bar", {"n": 2})))
            publisher.start()
            await asyncio.wait_for(listener.aevent.wait(), 5)
            publisher.join()
            assert len(threadsafe_calls) == 1
            assert [item.data["n"] for item in listener.channel_items["pair-test-wake"]] == [1, 2]
        finally:
            del loop.call_soon_threadsafe
            manager.remove_listener(listener)

    asyncio.run(scenario())

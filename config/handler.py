"""Django's ASGI handler with the request running in one thread from the first middleware
to the rendered response, on a thread that outlives the request.

Under ASGI, Django builds its middleware chain in async mode: every middleware written as
`MiddlewareMixin` (all of Django's own) then runs each of its `process_*` methods through
`sync_to_async`, a sync-only middleware (ours) switches back with `async_to_sync`, and the
view and its rendering are two more switches: about a dozen hand-offs between the event
loop and the sync thread for one API request. All our views and middleware are sync, so
the chain is built in sync mode and entered once (docs/DECISIONS.md, with the figures).

Django gives each request a thread-sensitive context of its own, which asgiref serves
with a new thread, joined by yet another thread when the request ends: two thread starts
per request, 15 % of a small request's CPU. The request's context here is served by a
single-thread executor taken from a pool and returned after (asgiref's
`ThreadSensitiveContext(executor=...)`): the same one-thread-per-request guarantee (the
request_started / request_finished receivers that return the thread's database
connection to the pool run on the thread that used it), with threads reused."""

import functools
import io
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler, get_script_prefix


class RequestThreads:
    """Single-thread executors lent to requests one at a time, on the event loop's thread.
    As many as requests in flight; at most `keep` wait idle between bursts."""

    def __init__(self, keep: int = 64):
        self.keep = keep
        self.idle: list[ThreadPoolExecutor] = []

    def take(self) -> ThreadPoolExecutor:
        return self.idle.pop() if self.idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def give(self, executor: ThreadPoolExecutor) -> None:
        if len(self.idle) < self.keep:
            self.idle.append(executor)
        else:
            executor.shutdown(wait=False)


class SyncChainASGIHandler(ASGIHandler):
    threads = RequestThreads()

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        # the path Django resolves: without the script prefix (root_path, FORCE_SCRIPT_NAME)
        route = self.loop_routes().get(scope["path"].removeprefix(get_script_prefix(scope)))
        if route is not None:
            answered, receive = await self.answered_on_loop(route, scope, receive, send)
            if answered:
                return
        executor = self.threads.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.give(executor)

    async def get_response_async(self, request):
        # thread_sensitive: the request's thread, where Django's request_started /
        # request_finished receivers run and return its database connection to the pool
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    @staticmethod
    @functools.cache
    def loop_routes() -> dict:
        """The paths answered on the event loop when they can be (config/loop.py): none
        where statements cannot be made there (SQLite)."""
        from config.db import can_fetch_on_loop
        from config.urls import LOOP_ROUTES

        return LOOP_ROUTES if can_fetch_on_loop() else {}

    async def answered_on_loop(self, route, scope, receive, send):
        """Serve the request on the event loop if its route answers it there (config/loop.py):
        (True, _), or (False, receive) with a `receive` that gives Django the request from
        its start, the body the loop read included."""
        from config import loop

        body, messages = b"", []
        if scope["method"] == "POST":
            body, messages = await loop.read_body(receive)
            if body is None:  # too large, or the client left: Django answers as it would
                return False, loop.replaying(messages, receive)
        response = await loop.answer(route, self.request_class(scope, io.BytesIO(body)))
        if response is None:
            return False, loop.replaying(messages, receive)
        await self.send_response(response, send)
        return True, receive

"""Django's ASGI handler with the request running in one thread from the first middleware
to the rendered response.

Under ASGI, Django builds its middleware chain in async mode: every middleware written as
`MiddlewareMixin` (all of Django's own) then runs each of its `process_*` methods through
`sync_to_async`, a sync-only middleware (ours) switches back with `async_to_sync`, and the
view and its rendering are two more switches: about a dozen hand-offs between the event
loop and the sync thread for one API request. All our views and middleware are sync, so
the chain is built in sync mode and entered once (docs/DECISIONS.md, with the figures)."""

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class SyncChainASGIHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        # thread_sensitive: the same thread as Django's request_started / request_finished
        # receivers, which return this thread's database connection to the pool
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

"""schemathesis reads TOON answers with the reference decoder, so their bodies are checked
against the response schemas like JSON ones (SCHEMATHESIS_HOOKS=tests.api.schemathesis_hooks)."""

import schemathesis
import toon_format


@schemathesis.deserializer("application/toon")
def toon(_ctx, response):
    return toon_format.decode(response.content.decode("utf-8"))

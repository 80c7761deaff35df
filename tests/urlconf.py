"""The URLconf's routes as strings, for tests that must cover every route."""

from django.urls import URLPattern, URLResolver, get_resolver


def url_routes(patterns=None, prefix: str = "", whole: tuple[str, ...] = ()):
    """Every route of the URLconf (prefixes joined, converters left as written); an included
    URLconf whose prefix is in `whole` counts as one route."""
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern) in whole:
                yield prefix + str(entry.pattern)
                continue
            yield from url_routes(entry.url_patterns, prefix + str(entry.pattern), whole)
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)

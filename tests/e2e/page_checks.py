"""What every page passes in a real browser, in one place: no console error, no uncaught
page error, no failed request and no answer of 400 or more while the test ran; no sideways
scroll; every action inside its card."""

from __future__ import annotations

import time

# Every visible control inside each card (and plan box) that holds it, on all four sides.
ACTIONS_OUTSIDE_THEIR_CARD = """() => {
  const outside = [];
  for (const action of document.querySelectorAll(
      '.card a, .card button, .card input, .card select, .card textarea, .card table')) {
    if (action.type === 'hidden' || action.hidden) continue;
    // a wide table in a sideways-scrolling box (.scroll-x) is seen through that box
    const r = (action.closest('.scroll-x') || action).getBoundingClientRect();
    if (!r.width && !r.height) continue;
    for (const holder of [action.closest('.card'), action.closest('.plan')].filter(Boolean)) {
      const box = holder.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
        outside.push(`${action.outerHTML.slice(0, 100)} outside ${holder.id || holder.className}`);
        break;
      }
    }
  }
  return outside;
}"""


class PageWatch:
    """What went wrong in the browser from now on, as `problems`. Not counted:
    * a load the page itself cancelled (ERR_ABORTED: a pair switch, a redirect to Checkout);
    * the console's "Failed to load resource" line, which repeats a failed answer without
      its address (the answer is counted with it)."""

    def __init__(self, page):
        self.page = page
        self.problems: list[str] = []
        self.requests: list[tuple[float, str]] = []  # (time.monotonic(), url) of every request
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("request", lambda request: self.requests.append((time.monotonic(), request.url)))
        page.on("requestfailed", self._failed)
        page.on("response", lambda response: response.status >= 400
                and self.problems.append(f"{response.status}: {response.url}"))

    def _console(self, message) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.problems.append(f"console: {message.text} {(message.location or {}).get('url', '')}")

    def _failed(self, request) -> None:
        if "ERR_ABORTED" not in (request.failure or ""):
            self.problems.append(f"failed: {request.url} {request.failure}")

    def assert_clean(self, step: str = "") -> None:
        assert self.problems == [], f"{step}: {self.problems}"


def at_width(page, width: int) -> PageWatch:
    """The page at `width` px (900 high), watched from now on."""
    page.set_viewport_size({"width": width, "height": 900})
    return PageWatch(page)


def assert_fits(page, step: str = "") -> None:
    """No sideways scroll, and every action inside its card."""
    scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll <= inner, f"{step} {page.url} scrolls sideways at {inner} px: {scroll} px wide"
    outside = page.evaluate(ACTIONS_OUTSIDE_THEIR_CARD)
    assert outside == [], f"{step} actions outside their card: {outside}"


def assert_settled_page_is_clean(page, watch: PageWatch, step: str = "") -> None:
    """Once the page's requests have settled (not for a page holding a live feed open):
    it fits, and nothing went wrong so far."""
    page.wait_for_load_state("networkidle")
    assert_fits(page, step)
    watch.assert_clean(step)

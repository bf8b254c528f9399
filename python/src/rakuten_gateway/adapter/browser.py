"""Browser steps with Playwright (async API) on the system's Chromium.

:class:`Browser` keeps one tab and what the evidence needs — the last navigation's method and
HTTP status — so that ``capture()`` is one line in a site object::

    class MySite(SiteAdapter):
        def __init__(self) -> None:
            self.browser = Browser()
        async def start(self) -> None:
            await self.browser.start()
        async def close(self) -> None:
            await self.browser.close()
        async def capture(self) -> Evidence | None:
            return await self.browser.capture()

Chromium is Debian's ``/usr/bin/chromium`` (``executable_path``), headless, with the flags in
:data:`HEADLESS_ARGS`; ``playwright install`` is never needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from playwright.async_api import (
    Browser as PwBrowser,
)
from playwright.async_api import (
    BrowserContext,
    Page,
    Playwright,
    Response,
    async_playwright,
)

from .protocol import Evidence, UnexpectedPage
from .steps import PointOfNoReturn

__all__ = ["CHROMIUM", "HEADLESS_ARGS", "Browser"]

#: The system's Chromium.
CHROMIUM = "/usr/bin/chromium"

#: Headless flags: no sandbox (containers), no GPU, nothing fetched in the background.
HEADLESS_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)

#: The HTTP status of the shown document from Navigation Timing (0: none, e.g. an error page).
_STATUS_JS = (
    "() => { const e = performance.getEntriesByType('navigation')[0];"
    " return e && e.responseStatus ? e.responseStatus : 0; }"
)


class Browser:
    """One Chromium tab for a site object's steps."""

    def __init__(
        self,
        *,
        executable_path: str = CHROMIUM,
        args: Sequence[str] = HEADLESS_ARGS,
        headless: bool = True,
        navigation_timeout: float = 20.0,
        viewport: tuple[int, int] = (1280, 900),
        locale: str = "ja-JP",
        full_page_screenshots: bool = True,
        record_har: str | None = None,
        replay_har: str | None = None,
    ) -> None:
        """``record_har``: write every request and answer of this session to a HAR file (record
        the pages of a step you work by hand). ``replay_har``: answer every request from such a
        file and send nothing to the network (test a step on recorded pages); a request the
        file does not hold fails."""
        self.executable_path = executable_path
        self.args = list(args)
        self.headless = headless
        self.navigation_timeout_ms = navigation_timeout * 1000
        self.viewport = viewport
        self.locale = locale
        self.full_page = full_page_screenshots
        self.record_har = record_har
        self.replay_har = replay_har
        self._pw: Playwright | None = None
        self._browser: PwBrowser | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._method = "GET"
        self._status = 0

    async def start(self) -> None:
        """Launches Chromium with a fresh profile and opens the tab."""
        self._pw = await async_playwright().start()
        self._browser = await self._pw.chromium.launch(
            executable_path=self.executable_path, headless=self.headless, args=self.args
        )
        self._context = await self._browser.new_context(
            viewport={"width": self.viewport[0], "height": self.viewport[1]},
            locale=self.locale,
            record_har_path=self.record_har,
        )
        if self.replay_har is not None:
            await self._context.route_from_har(self.replay_har, not_found="abort")
        self._page = await self._context.new_page()
        self._page.set_default_timeout(self.navigation_timeout_ms)
        self._page.set_default_navigation_timeout(self.navigation_timeout_ms)

    async def close(self) -> None:
        """Closes the browser (Chromium ends with it)."""
        try:
            if self._context is not None:
                await self._context.close()  # writes the HAR being recorded
            if self._browser is not None:
                await self._browser.close()
        finally:
            if self._pw is not None:
                await self._pw.stop()
            self._pw = self._browser = self._context = self._page = None

    @property
    def page(self) -> Page:
        """The tab."""
        if self._page is None:
            raise RuntimeError("the browser is not started")
        return self._page

    async def add_cookie(self, name: str, value: str, url: str) -> None:
        """Sets a cookie for ``url``'s site (a saved session, for instance)."""
        if self._context is None:
            raise RuntimeError("the browser is not started")
        await self._context.add_cookies([{"name": name, "value": value, "url": url}])

    def _landed(self, resp: Response | None, method: str) -> int:
        self._method = resp.request.method if resp is not None else method
        self._status = resp.status if resp is not None else 0
        return self._status

    async def open(self, url: str) -> int:
        """Opens ``url`` (GET) and waits for it to load; returns the HTTP status."""
        resp = await self.page.goto(url, wait_until="load")
        return self._landed(resp, "GET")

    async def _require(self, selector: str) -> None:
        if await self.page.locator(selector).count() == 0:
            raise UnexpectedPage(f"{self.page.url}: no {selector} on the page")

    async def press(
        self, selector: str, *, point: PointOfNoReturn | None = None, method: str = "POST"
    ) -> int:
        """Clicks ``selector`` (a button that loads a page) and waits for the page it leads to;
        returns its HTTP status. A missing button is :class:`UnexpectedPage` (nothing pressed).
        With ``point``, it is crossed just before the click: the click may act."""
        await self._require(selector)
        if point is not None:
            point.cross()
        async with self.page.expect_navigation(wait_until="load") as nav:
            await self.page.locator(selector).first.click()
        return self._landed(await nav.value, method)

    async def follow(self, selector: str) -> int:
        """Follows the link ``selector`` (GET); returns the HTTP status."""
        return await self.press(selector, method="GET")

    async def fill(self, selector: str, text: str) -> None:
        """Types ``text`` into the field ``selector`` (missing: :class:`UnexpectedPage`)."""
        await self._require(selector)
        await self.page.locator(selector).first.fill(text)

    async def select(self, selector: str, value: str) -> None:
        """Picks ``value`` in the select ``selector`` (not offered: :class:`UnexpectedPage`)."""
        await self._require(selector)
        loc = self.page.locator(selector).first
        values = await loc.evaluate("(s) => Array.from(s.options).map((o) => o.value)")
        if value not in values:
            raise UnexpectedPage(f"{self.page.url}: {selector} does not offer {value!r}")
        await loc.select_option(value)

    async def has(self, selector: str) -> bool:
        """Whether the page shows ``selector``."""
        return await self.page.locator(selector).count() > 0

    async def evaluate(self, js: str) -> Any:
        """Runs a JavaScript function expression in the page and returns its result."""
        return await self.page.evaluate(js)

    async def capture(self) -> Evidence | None:
        """The evidence of the page shown: URL, the last navigation's method and status, HTML
        and a PNG screenshot. ``None`` before :meth:`start`."""
        if self._page is None:
            return None
        page = self._page
        status = self._status
        if status == 0:
            try:
                status = int(await page.evaluate(_STATUS_JS))
            except Exception:  # an error page may refuse scripts
                status = 0
        html = await page.content()
        png = await page.screenshot(full_page=self.full_page, type="png")
        return Evidence.of(
            url=page.url, method=self._method, http_status=status, html=html, png=png
        )

"""HEAD answered like GET, without a body (RFC 9110 section 9.3.2), for every GET route.

FastAPI's `@app.get` routes accept GET only, so HEAD was answered 405. This middleware routes a
HEAD request as the GET it mirrors and drops the body of the answer, keeping its status and
headers (Content-Length included, as GET would have sent it).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, without_body)

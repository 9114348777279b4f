/**
 * The loopback guard of the embedded emulator. MiniStack checks no signature, answers any CORS preflight
 * with `Access-Control-Allow-Origin: *` and serves any `Host`, so a web page (directly, or through DNS
 * rebinding) could drive it, and its Lambda service runs whatever code it is given. It has no setting to
 * refuse by Origin or Host, so leaseq starts it through a small launcher that wraps its ASGI app before
 * serving it: every HTTP and WebSocket request is checked in the emulator process itself, so no
 * unguarded port exists at all (a proxy in front would leave the emulator's own port open behind it).
 *
 * Refused with 403 and a one-line reason: a request with an `Origin` header, with a `Sec-Fetch-Site`
 * other than `none` (a browser's cross-site request that carries no Origin, such as an image GET), or
 * whose `Host` names anything but the loopback (`127.0.0.1`, `localhost`, `[::1]`, any port: a local proxy
 * such as Toxiproxy forwards its own). The AWS SDKs and CLIs send
 * neither header and the loopback Host, so they pass unchanged.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The launcher's file name in the state directory; also how `emulator-record.ts` recognises its process. */
export const GUARD_FILE = 'emulator-guard.py';

/**
 * The launcher. It replaces `ministack.app.app` (the ASGI entry that `ministack.app.main()` serves) with
 * the guard and then runs `main()` as the `ministack` command would, so bind address, port, TLS and
 * logging stay MiniStack's own; `GATEWAY_PORT` (the port it listens on) only names an example in refusals.
 */
const LAUNCHER = `# Written by leaseq (shared/local/emulator-guard.ts) on every start; edits are overwritten.
import os
import sys

import ministack.app as gateway

PORT = os.environ["GATEWAY_PORT"]
# Loopback names only. Any port: a local TCP proxy (Toxiproxy in the fault tests) forwards the Host of
# its own port; a rebound DNS name is what a web page would send, and it never passes.
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "[::1]"}
_served = gateway.app


def refusal(scope):
    host = None
    for name, value in scope.get("headers", []):
        name = name.lower()
        if name == b"origin":
            return "refused by leaseq's emulator guard: requests from web pages (with an Origin header) are not served"
        if name == b"sec-fetch-site" and value.strip().lower() != b"none":
            return "refused by leaseq's emulator guard: cross-site browser requests (Sec-Fetch-Site) are not served"
        if name == b"host":
            if host is not None:
                return "refused by leaseq's emulator guard: more than one Host header"
            host = value.decode("latin-1").strip().lower()
    name = None if host is None else host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name not in LOOPBACK_NAMES:
        shown = "none" if host is None else repr(host)
        return (
            f"refused by leaseq's emulator guard: Host {shown} is not this emulator's loopback address"
            f" (127.0.0.1, localhost or [::1], e.g. 127.0.0.1:{PORT})"
        )
    return None


async def guarded(scope, receive, send):
    if scope["type"] in ("http", "websocket"):
        reason = refusal(scope)
        if reason is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            body = (reason + "\\n").encode()
            await send({
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            })
            await send({"type": "http.response.body", "body": body})
            return
    await _served(scope, receive, send)


gateway.app = guarded
sys.argv = [sys.argv[0]]
sys.exit(gateway.main())
`;

/** Writes the launcher into `stateDir` (owner-only, like the rest of the state) and returns its path. */
export function writeGuardLauncher(stateDir: string): string {
  const file = join(stateDir, GUARD_FILE);
  writeFileSync(file, LAUNCHER, { mode: 0o600 });
  // `mode` applies only when the file is created; one left by an older start keeps its bits otherwise.
  chmodSync(file, 0o600);
  return file;
}

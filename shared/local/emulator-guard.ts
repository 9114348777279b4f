/**
 * The guard of the embedded emulator. MiniStack checks no signature, answers any CORS preflight with
 * `Access-Control-Allow-Origin: *`, serves any `Host` and its Lambda service runs whatever code it is
 * given, so anyone who could send it a request (a link the operator opens, a web page, another local
 * user) could drive it. leaseq starts it through a small launcher that wraps its ASGI app before serving
 * it: every HTTP and WebSocket request is checked in the emulator process itself, so no unguarded port
 * exists at all (a proxy in front would leave the emulator's own port open behind it).
 *
 * Refused with 403 and a one-line reason:
 * - a request with an `Origin` header, with a `Sec-Fetch-Site` other than `none`, or whose `Host` names
 *   anything but the loopback (`127.0.0.1`, `localhost`, `[::1]`, any port: a local proxy such as
 *   Toxiproxy forwards its own);
 * - every request that is not SigV4-signed (`AWS4-HMAC-SHA256`, in the Authorization header or a
 *   presigned query) with the credential of this start (`shared/aws/local-credential.ts`), which only
 *   the operator can read; the signature is recomputed over the canonical request with MiniStack's own
 *   SigV4 module (`ministack.core.sigv4`, the one its AUTH mode uses), a hashed payload must be the
 *   body's, and the signing time must be within 15 minutes. The one exception is the PUT by which a
 *   custom resource's function answers CloudFormation, to a URL holding a random UUID it was given.
 *
 * Functions the emulator runs sign with the key id MiniStack gives them (their account id) and the
 * emulator's secret, which is in their environment; temporary credentials its STS issued (AssumeRole:
 * the CDK CLI assumes the bootstrap roles) are served with their own secret and session token; the AWS SDKs, CLIs and `curl --aws-sigv4` sign
 * with the credential `leaseq local env` prints and send neither browser header.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FUNCTION_ACCESS_KEY_ID } from '../aws/local-credential.ts';

/** The launcher's file name in the state directory; also how `emulator-record.ts` recognises its process. */
export const GUARD_FILE = 'emulator-guard.py';

/**
 * The launcher. It replaces `ministack.app.app` (the ASGI entry that `ministack.app.main()` serves) with
 * the guard and then runs `main()` as the `ministack` command would, so bind address, port, TLS and
 * logging stay MiniStack's own; `GATEWAY_PORT` (the port it listens on) only names an example in refusals.
 */
const LAUNCHER = `# Written by leaseq (shared/local/emulator-guard.ts) on every start; edits are overwritten.
import hashlib
import hmac
import json
import os
import re
import sys
from urllib.parse import parse_qs, quote

import ministack.app as gateway
from ministack.core import sigv4

PORT = os.environ["GATEWAY_PORT"]
# Loopback names only. Any port: a local TCP proxy (Toxiproxy in the fault tests) forwards the Host of
# its own port; a rebound DNS name is what a web page would send, and it never passes.
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "[::1]"}
# The credential of this start (leaseq wrote it into the state directory and the environment). The
# functions MiniStack runs sign with their account id as the key id and this secret.
SECRET = os.environ["AWS_SECRET_ACCESS_KEY"]
KEY_IDS = {os.environ["AWS_ACCESS_KEY_ID"], "${FUNCTION_ACCESS_KEY_ID}"}
# A custom resource answers CloudFormation with a PUT to the URL it was handed, which holds a random UUID
# (fullmatch: "$" alone would pass the UUID with a newline after it).
CFN_RESPONSE = re.compile(r"^/_ministack/cfn-response/[0-9a-f-]{36}$")
HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")
NOT_SIGNED = (
    "the request is not signed; this emulator serves only requests signed with the credential of its"
    " start (\`leaseq local env\` prints it)"
)
_served = gateway.app


def browser_refusal(scope):
    host = None
    signed = False
    for name, value in scope.get("headers", []):
        name = name.lower()
        if name == b"origin":
            return "refused by leaseq's emulator guard: requests from web pages (with an Origin header) are not served"
        if name == b"sec-fetch-site" and value.strip().lower() != b"none":
            return "refused by leaseq's emulator guard: cross-site browser requests (Sec-Fetch-Site) are not served"
        if name == b"authorization":
            # One signature per request: with two, the guard and MiniStack could each read another.
            if signed:
                return "refused by leaseq's emulator guard: more than one Authorization header"
            signed = True
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


def header_map(scope):
    headers = {}
    for name, value in scope.get("headers", []):
        key = name.decode("latin-1").lower()
        text = sigv4.decode_header_value(value)
        headers[key] = headers[key] + ", " + text if key in headers else text
    return headers


def secret_for(key_id, headers, query, presigned):
    """The secret a key id signs with: this start's, or that of a live STS session the emulator issued
    (AssumeRole, which only a request signed with this start's credential could ask for), presented with
    its session token. None for any other key."""
    if key_id in KEY_IDS:
        return SECRET
    try:
        from ministack.services import sts as sts_svc

        session = sts_svc._sessions.get(key_id)
        if not session or sts_svc._session_expired(session):
            return None
    except Exception:
        return None
    token = (query.get("X-Amz-Security-Token") or [""])[0] if presigned else headers.get("x-amz-security-token", "")
    expected = str(session.get("SessionToken") or "")
    if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
        return None
    return str(session.get("SecretAccessKey") or "") or None


def header_refusal(scope, headers):
    """What the headers alone decide: (code, reason) for a request to refuse, else the signature's context
    (None for the CloudFormation response PUT, which is not signed)."""
    method = scope.get("method", "GET")
    path = scope.get("path", "/")
    if method == "PUT" and CFN_RESPONSE.fullmatch(path):
        return None
    query = parse_qs(scope.get("query_string", b"").decode("utf-8", "replace"), keep_blank_values=True)
    raw_path = scope["raw_path"].decode("latin-1") if scope.get("raw_path") else quote(path)
    authorization = headers.get("authorization", "")
    presigned = not authorization and any(name.lower() == "x-amz-signature" for name in query)
    if not authorization and not presigned:
        return "MissingAuthenticationToken", NOT_SIGNED
    if presigned:
        if (query.get("X-Amz-Algorithm") or [""])[0] != "AWS4-HMAC-SHA256":
            return "IncompleteSignature", "only AWS4-HMAC-SHA256 (SigV4) signatures are served"
        signature = sigv4.parse_query_signature(query)
    else:
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return "IncompleteSignature", "only AWS4-HMAC-SHA256 (SigV4) signatures are served"
        signature = sigv4.parse_header_signature(headers)
    if isinstance(signature, tuple):
        return signature[0], signature[1].split("\\n")[0]
    secret = secret_for(signature.access_key_id, headers, query, presigned)
    if secret is None:
        return "UnrecognizedClientException", (
            "the request is signed with an access key id this emulator did not issue; sign with the"
            " credential of its start (\`leaseq local env\` prints it)"
        )
    if presigned:
        try:
            expired = sigv4.presigned_request_is_expired(signature.amz_date, (query.get("X-Amz-Expires") or [""])[0])
        except ValueError:
            expired = True
        if expired:
            return "AccessDenied", "the presigned request has expired (or gives no valid X-Amz-Expires)"
    else:
        skewed = sigv4.request_time_failure(signature)
        if skewed:
            return skewed
    return {"signature": signature, "secret": secret, "method": method, "raw_path": raw_path,
            "query": query, "presigned": presigned}


def body_is_unsigned(context, headers):
    """True when the signature covers no hash of the body (the JSON and query protocols hash the body
    itself), so it can be checked only once the whole body is held."""
    if context["presigned"] and context["signature"].service == "s3":
        return False
    return not headers.get("x-amz-content-sha256")


def seed_signature_matches(context, headers):
    """Whether the signature is right over the declared payload hash, before the body is read (an
    aws-chunked body's chunk signatures and a hex hash are checked against the body afterwards)."""
    signature = context["signature"]
    if signature.date_stamp != signature.amz_date[:8]:
        return False
    _, string_to_sign = sigv4.header_signing_documents(
        signature, context["method"], context["raw_path"], context["query"], headers, b"",
        presigned=context["presigned"],
    )
    if signature.region_set is not None:
        return sigv4.sigv4a_signature_matches(signature.access_key_id, context["secret"], string_to_sign, signature.signature)
    key = sigv4.derive_signing_key(context["secret"], signature.date_stamp, signature.region, signature.service)
    computed = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    return sigv4.signatures_match(computed, signature.signature)


MISMATCH = (
    "InvalidSignatureException",
    "the signature does not match the request signed with the credential of this start",
)


def body_refusal(context, headers, body):
    """(code, reason) when the body is not the one signed or the signature does not match, else None."""
    declared = headers.get("x-amz-content-sha256", "")
    if HEX_SHA256.match(declared) and not hmac.compare_digest(declared, hashlib.sha256(body).hexdigest()):
        return "XAmzContentSHA256Mismatch", "the body is not the one whose hash was signed"
    failure = sigv4.header_signature_failure(
        context["signature"], context["secret"], context["method"], context["raw_path"], context["query"],
        headers, body, presigned=context["presigned"],
    )
    return MISMATCH if failure else None


def signature_refusal(scope, headers, body):
    """(code, reason) when the request is not signed with this start's credential, else None."""
    context = header_refusal(scope, headers)
    if context is None or isinstance(context, tuple):
        return context
    return body_refusal(context, headers, body)


async def refuse(send, status, reason, code=None, headers=None):
    """403 with the reason: as AWS error JSON or XML when a code is given (SDKs show it), else text."""
    if code is None:
        body, content_type = (reason + "\\n").encode(), b"text/plain; charset=utf-8"
    elif "json" in (headers or {}).get("content-type", "") or "x-amz-target" in (headers or {}):
        body = json.dumps({"__type": code, "message": reason}).encode()
        content_type = b"application/x-amz-json-1.0"
    else:
        text = reason.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        body = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{text}</Message></Error>"
            "<RequestId>0</RequestId></ErrorResponse>"
        ).encode()
        content_type = b"text/xml"
    response_headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if code is not None:
        response_headers.append((b"x-amzn-errortype", code.encode()))
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": body})


# Who cannot sign must not make the emulator hold what they send. A body is read before its signature
# is checked only when no hash of it was signed (the JSON and query protocols): then it is bounded,
# each (Lambda's largest inline code, 50 MB zipped, as base64, with room) and all of them together.
MAX_UNVERIFIED_BODY = 80 * 1024 * 1024
MAX_UNVERIFIED_TOTAL = 256 * 1024 * 1024
MAX_CFN_RESPONSE = 1024 * 1024
_unverified = [0]
TOO_LARGE = "RequestEntityTooLarge"


class BodyTooLarge(Exception):
    pass


async def read_body(receive, limit=None):
    """The whole body, None when the client left; BodyTooLarge past \`limit\` (counted in the shared
    budget of unverified bodies while it is held)."""
    chunks = []
    held = 0
    try:
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                return None
            chunk = message.get("body", b"")
            chunks.append(chunk)
            if limit is not None:
                held += len(chunk)
                _unverified[0] += len(chunk)
                if held > limit or _unverified[0] > MAX_UNVERIFIED_TOTAL:
                    raise BodyTooLarge()
            if not message.get("more_body", False):
                return b"".join(chunks)
    finally:
        _unverified[0] -= held


def replay(body, receive):
    """The receive callable the emulator gets: the body already read, then the connection's own."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed():
        return pending.pop() if pending else await receive()

    return replayed


async def refuse_signature(send, scope, refused, headers, status=403):
    code, why = refused
    print(f"leaseq guard: refused {scope.get('method')} {scope.get('path')}: {code}", file=sys.stderr, flush=True)
    await refuse(send, status, f"refused by leaseq's emulator guard: {why}", code, headers)


async def guarded(scope, receive, send):
    if scope["type"] not in ("http", "websocket"):
        await _served(scope, receive, send)
        return
    reason = browser_refusal(scope)
    headers = header_map(scope)
    if reason is None and scope["type"] == "websocket":
        refused = signature_refusal(scope, headers, b"")
        reason = None if refused is None else f"refused by leaseq's emulator guard: {refused[1]}"
    if reason is not None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await refuse(send, 403, reason)
        return
    if scope["type"] == "websocket":
        await _served(scope, receive, send)
        return
    context = header_refusal(scope, headers)
    if not isinstance(context, tuple) and context is not None and not body_is_unsigned(context, headers):
        if not seed_signature_matches(context, headers):
            context = MISMATCH
    if isinstance(context, tuple):
        await refuse_signature(send, scope, context, headers)
        return
    limit = MAX_CFN_RESPONSE if context is None else MAX_UNVERIFIED_BODY if body_is_unsigned(context, headers) else None
    declared_length = headers.get("content-length", "")
    if limit is not None and declared_length.isdigit() and int(declared_length) > limit:
        await refuse_signature(send, scope, (TOO_LARGE, f"a body this emulator must read before it can check its signature is limited to {limit} bytes"), headers, 413)
        return
    try:
        body = await read_body(receive, limit)
    except BodyTooLarge:
        await refuse_signature(send, scope, (TOO_LARGE, "too many bytes of bodies whose signature is not yet checked"), headers, 413)
        return
    if body is None:
        return
    refused = None if context is None else body_refusal(context, headers, body)
    if refused is not None:
        await refuse_signature(send, scope, refused, headers)
        return
    await _served(scope, replay(body, receive), send)


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

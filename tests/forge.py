"""A stand-in for the GitHub and GitLab REST APIs on 127.0.0.1, over HTTPS.

The CI recipes talk to those APIs with the real `gh` and `curl`; neither
service can be reached from the tests, so this server answers the few
endpoints the recipes call, the way the services document them: GitHub's
issue comments (paginated by `Link` headers), workflow runs, artifacts (the
zip behind a redirect) and pull requests under `/api/v3` (the prefix `gh`
uses for a GitHub Enterprise host, which is what GH_HOST=127.0.0.1:PORT
makes it); GitLab's merge-request notes (paginated by `X-Next-Page`) and
job artifacts under `/api/v4`. Each request's token is checked; every
request is logged. The certificate is self-signed for 127.0.0.1 and handed
to the clients through SSL_CERT_FILE (gh) and CURL_CA_BUNDLE (curl).
"""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

GITHUB_TOKEN = "ghs_forge-token-0123456789"
GITLAB_TOKEN = "glpat-forge-token-0123456789"
GITLAB_JOB_TOKEN = "glcbt-forge-job-token"
MAX_PER_PAGE = 100


def self_signed_certificate(folder: Path) -> tuple[Path, Path] | None:
    """(certificate, key) for 127.0.0.1, or None without the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    cert, key = folder / "forge-cert.pem", folder / "forge-key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


@dataclass
class Request:
    method: str
    path: str  # with the query
    headers: dict[str, str]
    body: bytes


@dataclass
class Forge:
    """What the APIs hold: comments and notes, runs and artifacts."""

    repo: str = "octo/model"
    gitlab_project: str = "7"
    comments: dict[int, list[dict]] = field(default_factory=dict)  # GitHub pull request → comments
    notes: dict[int, list[dict]] = field(default_factory=dict)  # GitLab merge request iid → notes
    pulls: dict[int, dict] = field(default_factory=dict)  # GitHub pull request → {"head": {"sha": …}}
    runs: list[dict] = field(default_factory=list)  # workflow runs, newest first
    artifacts: dict[int, dict] = field(default_factory=dict)  # artifact id → {"run", "name", "expired", "zip"}
    job_artifacts: dict[tuple[str, str], bytes] = field(default_factory=dict)  # GitLab (ref, job) → zip
    log: list[Request] = field(default_factory=list)
    next_id: int = 1000
    # Who GITHUB_TOKEN is: None for the workflow's own token (an app installation token, which GitHub refuses
    # GET /user with 403 and whose comments are github-actions[bot]'s), else a user's login (a personal token).
    token_login: str | None = None
    gitlab_user_id: int = 77  # the user GITLAB_TOKEN belongs to (a project access token's bot user)

    @property
    def commenter(self) -> str:
        return self.token_login or "github-actions[bot]"

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def add_comment(self, pr: int, body: str, login: str = "someone") -> dict:
        comment = {"id": self.new_id(), "body": body, "user": {"login": login}}
        comment["html_url"] = f"https://github.example/{self.repo}/pull/{pr}#issuecomment-{comment['id']}"
        self.comments.setdefault(pr, []).append(comment)
        return comment

    def add_note(self, iid: int, body: str, system: bool = False, author_id: int = 12) -> dict:
        note = {"id": self.new_id(), "body": body, "system": system, "author": {"id": author_id}}
        self.notes.setdefault(iid, []).append(note)
        return note

    def add_run(self, branch: str, event: str = "push", workflow: str = "profile.yml",
                artifacts: dict[str, bytes] | None = None, expired: bool = False) -> int:
        run_id = self.new_id()
        self.runs.insert(0, {"id": run_id, "head_branch": branch, "event": event, "status": "completed",
                             "workflow": workflow})
        for name, data in (artifacts or {}).items():
            self.artifacts[self.new_id()] = {"run": run_id, "name": name, "expired": expired, "zip": data}
        return run_id

    def requests(self, method: str, pattern: str) -> list[Request]:
        return [r for r in self.log if r.method == method and re.search(pattern, r.path)]


class _Handler(BaseHTTPRequestHandler):
    forge: Forge
    base: str  # https://127.0.0.1:PORT

    def log_message(self, *args) -> None:  # keep the test output quiet
        pass

    # -- plumbing

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload: object = None, headers: dict[str, str] | None = None,
              raw: bytes | None = None, content_type: str = "application/json; charset=utf-8") -> None:
        data = raw if raw is not None else (b"" if payload is None else json.dumps(payload).encode())
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        body = self._body() if method in ("POST", "PATCH", "PUT") else b""
        self.forge.log.append(Request(method, self.path, dict(self.headers), body))
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path
        try:
            if path.startswith("/api/v3/"):
                if self.headers.get("Authorization") != f"token {GITHUB_TOKEN}":
                    return self._send(401, {"message": "Bad credentials"})
                if path == "/api/v3/user":
                    if self.forge.token_login is None:
                        return self._send(403, {"message": "Resource not accessible by integration"})
                    return self._send(200, {"login": self.forge.token_login, "type": "User"})
                return self._github(method, path[len("/api/v3/"):], query, body)
            if path == "/api/v4/user":
                if self.headers.get("PRIVATE-TOKEN") != GITLAB_TOKEN:
                    return self._send(401, {"message": "401 Unauthorized"})
                return self._send(200, {"id": self.forge.gitlab_user_id, "username": "project_7_bot"})
            if path.startswith("/api/v4/"):
                return self._gitlab(method, path[len("/api/v4/"):], query, body)
            if path.startswith("/blob/"):  # where an artifact's zip redirects to (no token needed)
                artifact = self.forge.artifacts.get(int(path.rsplit("/", 1)[1]))
                if artifact is None:
                    return self._send(404, {"message": "Not Found"})
                return self._send(200, raw=artifact["zip"], content_type="application/zip")
        except (ValueError, KeyError) as exc:
            return self._send(400, {"message": f"bad request: {exc}"})
        return self._send(404, {"message": "Not Found"})

    def do_GET(self) -> None:  # noqa: N802 (http.server's names)
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def _page(self, items: list, query: dict) -> tuple[list, int, bool]:
        per_page = min(int(query.get("per_page", 30)), MAX_PER_PAGE)
        page = int(query.get("page", 1))
        start = (page - 1) * per_page
        return items[start:start + per_page], page, start + per_page < len(items)

    # -- GitHub

    def _github(self, method: str, path: str, query: dict, body: bytes) -> None:
        forge = self.forge
        prefix = f"repos/{forge.repo}/"
        if not path.startswith(prefix):
            return self._send(404, {"message": "Not Found"})
        path = path[len(prefix):]
        if m := re.fullmatch(r"issues/(\d+)/comments", path):
            pr = int(m.group(1))
            if method == "POST":
                comment = forge.add_comment(pr, json.loads(body)["body"], login=forge.commenter)
                return self._send(201, comment)
            items, page, more = self._page(forge.comments.get(pr, []), query)
            headers = {}
            if more:
                nxt = f"{self.base}/api/v3/{prefix}{path}?per_page={query.get('per_page', 30)}&page={page + 1}"
                headers["Link"] = f'<{nxt}>; rel="next"'
            return self._send(200, items, headers)
        if (m := re.fullmatch(r"issues/comments/(\d+)", path)) and method == "PATCH":
            for comment in (c for cs in forge.comments.values() for c in cs):
                if comment["id"] == int(m.group(1)):
                    comment["body"] = json.loads(body)["body"]
                    return self._send(200, comment)
            return self._send(404, {"message": "Not Found"})
        if m := re.fullmatch(r"pulls/(\d+)", path):
            pull = forge.pulls.get(int(m.group(1)))
            return self._send(200, pull) if pull else self._send(404, {"message": "Not Found"})
        if m := re.fullmatch(r"actions/workflows/([^/]+)/runs", path):
            runs = [r for r in forge.runs if r["workflow"] == m.group(1)
                    and all(r[key] == query[q] for q, key in (("branch", "head_branch"), ("event", "event"),
                                                               ("status", "status")) if q in query)]
            items, _, _ = self._page(runs, query)
            return self._send(200, {"total_count": len(runs), "workflow_runs": items})
        if m := re.fullmatch(r"actions/runs/(\d+)/artifacts", path):
            found = [{"id": i, "name": a["name"], "expired": a["expired"]} for i, a in forge.artifacts.items()
                     if a["run"] == int(m.group(1)) and a["name"] == query.get("name", a["name"])]
            return self._send(200, {"total_count": len(found), "artifacts": found})
        if m := re.fullmatch(r"actions/artifacts/(\d+)/zip", path):
            if int(m.group(1)) not in forge.artifacts:
                return self._send(404, {"message": "Not Found"})
            return self._send(302, headers={"Location": f"{self.base}/blob/{m.group(1)}"})
        return self._send(404, {"message": "Not Found"})

    # -- GitLab

    def _gitlab(self, method: str, path: str, query: dict, body: bytes) -> None:
        forge = self.forge
        prefix = f"projects/{forge.gitlab_project}/"
        if not path.startswith(prefix):
            return self._send(404, {"message": "404 Project Not Found"})
        path = path[len(prefix):]
        if m := re.fullmatch(r"jobs/artifacts/(.+)/download", path):
            if self.headers.get("JOB-TOKEN") != GITLAB_JOB_TOKEN:
                return self._send(401, {"message": "401 Unauthorized"})
            data = forge.job_artifacts.get((unquote(m.group(1)), query.get("job", "")))
            if data is None:
                return self._send(404, {"message": "404 Not found"})
            return self._send(200, raw=data, content_type="application/zip")
        if self.headers.get("PRIVATE-TOKEN") != GITLAB_TOKEN:
            return self._send(401, {"message": "401 Unauthorized"})
        if m := re.fullmatch(r"merge_requests/(\d+)/notes", path):
            iid = int(m.group(1))
            if method == "POST":
                return self._send(201, forge.add_note(iid, json.loads(body)["body"], author_id=forge.gitlab_user_id))
            items, page, more = self._page(forge.notes.get(iid, []), query)
            return self._send(200, items, {"X-Next-Page": str(page + 1) if more else "", "X-Page": str(page)})
        if (m := re.fullmatch(r"merge_requests/(\d+)/notes/(\d+)", path)) and method == "PUT":
            for note in forge.notes.get(int(m.group(1)), []):
                if note["id"] == int(m.group(2)):
                    note["body"] = json.loads(body)["body"]
                    return self._send(200, note)
            return self._send(404, {"message": "404 Note Not Found"})
        return self._send(404, {"message": "404 Not Found"})


class ForgeServer:
    """`with ForgeServer(forge, cert, key) as server:` serves on server.base_url."""

    def __init__(self, forge: Forge, cert: Path, key: Path) -> None:
        handler = type("Handler", (_Handler,), {"forge": forge})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        self.base_url = f"https://{self.host}"
        handler.base = self.base_url
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ForgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

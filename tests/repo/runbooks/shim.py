"""Stand-in for the commands a runbook runs against things a test machine does not have (a
cluster, Docker, the sidecar's host, an Alertmanager, GPUs): it records every call and answers
as the real one would, from what the test prepared.

Installed as `<bin>/<name>` wrappers (`runbook_shell.install`) that run this file with the name
first. The environment says where things are: RUNBOOK_SHIM_LOG (one JSON line per call appended:
name, argv, cwd) and RUNBOOK_SHIM_CONFIG (a JSON file):

- "files": "<key>" -> content, for `kubectl exec POD -c C -- cat P` (key "kubectl:C:P"),
  `docker compose ... exec [-T] S cat P` ("compose:S:P") and `cat P` ("cat:P"); any other file
  is missing there, as it would be;
- "pod": the name `kubectl get pods -o name` prints;
- "secrets": Secret -> key -> base64 value, for `kubectl get secret[/]NAME -o jsonpath='{.data.K}'`;
- "sidecars", "engines": base URLs that reach the sidecar and the engine; "dead": true makes
  both refuse connections;
- "responses": "METHOD PATH" -> [status, body file] for the sidecar, "engine PATH" likewise.

Runs with `python -I -S` and imports little, to start fast: a runbook block may call it many
times.
"""

from __future__ import annotations

import json
import os
import sys


def _log(name: str, argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith("HELIOS_EXPORTER_")}
    with open(os.environ["RUNBOOK_SHIM_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"name": name, "argv": argv, "cwd": os.getcwd(), "env": env}) + "\n")


def _curlrc() -> list[str]:
    """What curl reads from $CURL_HOME/.curlrc (`name = "value"` lines) before its arguments."""
    home = os.environ.get("CURL_HOME")
    if not home or not os.path.exists(f"{home}/.curlrc"):
        return []
    args = []
    with open(f"{home}/.curlrc", encoding="utf-8") as rc:
        for line in rc:
            name, _, value = line.strip().partition("=")
            if name.strip() and not name.startswith("#"):
                args += [f"--{name.strip()}", value.strip().strip('"')]
    return args


def _config() -> dict:
    with open(os.environ["RUNBOOK_SHIM_CONFIG"], encoding="utf-8") as f:
        return json.load(f)


def _missing(path: str) -> int:
    sys.stderr.write(f"cat: {path}: No such file or directory\n")
    return 1


def _file(config: dict, key: str, path: str) -> int:
    content = config["files"].get(key)
    if content is None:
        return _missing(path)
    sys.stdout.write(content)
    return 0


def kubectl(argv: list[str], config: dict) -> int:
    if "exec" in argv and "--" in argv:
        command = argv[argv.index("--") + 1:]
        container = argv[argv.index("-c") + 1] if "-c" in argv else ""
        if command[:1] == ["cat"] and len(command) == 2:
            return _file(config, f"kubectl:{container}:{command[1]}", command[1])
        return 0
    words = [a for a in argv if not a.startswith("-")]
    if "get" in words:
        target = words[words.index("get") + 1:]
        name = target[0].split("/", 1)[1] if target and target[0].startswith("secret/") else \
            (target[1] if target[:1] == ["secret"] and len(target) > 1 else None)
        path = next((a for a in argv if a.startswith("jsonpath=")), "")
        if name is not None:
            key = path.removeprefix("jsonpath={.data.").removesuffix("}").replace("\\.", ".")
            value = config.get("secrets", {}).get(name, {}).get(key)
            if value is None:
                sys.stderr.write(f'Error from server (NotFound): secrets "{name}" not found\n')
                return 1
            sys.stdout.write(value)
            return 0
    if argv[:2] == ["get", "pods"] or argv[2:4] == ["get", "pods"]:
        if "name" in argv:
            sys.stdout.write(f"pod/{config['pod']}\n")
        return 0
    if "port-forward" in argv:
        ports = [a for a in argv if ":" in a and a.split(":")[0].isdigit()]
        for p in ports:
            local, remote = p.split(":")
            sys.stdout.write(f"Forwarding from 127.0.0.1:{local} -> {remote}\n")
        return 0
    return 0


def docker(argv: list[str], config: dict) -> int:
    if "exec" in argv:
        rest = [a for a in argv[argv.index("exec") + 1:] if a not in ("-T", "-it", "-i", "-t")]
        service, command = rest[0], rest[1:]
        if command[:1] == ["cat"] and len(command) == 2:
            return _file(config, f"compose:{service}:{command[1]}", command[1])
    return 0


def cat(argv: list[str], config: dict) -> int:
    if len(argv) == 1 and f"cat:{argv[0]}" in config["files"]:
        return _file(config, f"cat:{argv[0]}", argv[0])
    os.execv("/bin/cat", ["cat", *argv])
    return 127  # not reached


_CURL_VALUE_OPTIONS = {"-X", "--request", "-H", "--header", "-d", "--data", "--data-raw",
                       "-w", "--write-out", "-o", "--output", "-m", "--max-time", "-u", "--user",
                       "--cacert", "--connect-timeout", "--resolve"}


def curl(argv: list[str], config: dict) -> int:
    from urllib.parse import urlsplit
    method, url, fail, write_out, output = "GET", None, False, None, None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in _CURL_VALUE_OPTIONS:
            value = argv[i + 1]
            if arg in ("-X", "--request"):
                method = value
            elif arg in ("-d", "--data", "--data-raw") and method == "GET":
                method = "POST"
            elif arg in ("-w", "--write-out"):
                write_out = value
            elif arg in ("-o", "--output"):
                output = value
            i += 2
            continue
        if arg.startswith("-") and not arg.startswith("--"):
            fail = fail or "f" in arg[1:]
        elif arg in ("--fail", "--fail-with-body"):
            fail = True
        elif not arg.startswith("-"):
            url = arg
        i += 1
    if url is None:
        sys.stderr.write("curl: no URL specified\n")
        return 2
    base = next((b for b in config["sidecars"] if url.startswith(b)), None)
    kind = "sidecar"
    if base is None:
        base = next((b for b in config["engines"] if url.startswith(b)), None)
        kind = "engine"
    if base is None:
        sys.stderr.write(f"curl: (6) Could not resolve host: {urlsplit(url).hostname}\n")
        return 6
    if config.get("dead"):
        sys.stderr.write(f"curl: (7) Failed to connect to {urlsplit(url).netloc}: "
                         "Connection refused\n")
        return 7
    path = urlsplit(url).path or "/"
    key = f"{method} {path}" if kind == "sidecar" else f"engine {path}"
    status, body_file = config["responses"].get(key, [404, None])
    body = '{"detail":"Not Found"}'
    if body_file:
        with open(body_file, encoding="utf-8") as f:
            body = f.read()
    if fail and status >= 400:
        sys.stderr.write(f"curl: (22) The requested URL returned error: {status}\n")
        return 22
    if output not in ("/dev/null",):
        sys.stdout.write(body)
    if write_out is not None:
        sys.stdout.write(write_out.replace("%{http_code}", str(status)).replace("\\n", "\n"))
    return 0


def amtool(argv: list[str], config: dict) -> int:
    if "-q" in argv or "--quiet" in argv or ("silence" in argv and "add" in argv):
        sys.stdout.write("6b8f2bd4-1f3c-4c1e-9a55-0f6d3a0e2b71\n")
    return 0


HANDLERS = {"kubectl": kubectl, "docker": docker, "cat": cat, "curl": curl, "amtool": amtool}


def main() -> int:
    name, argv = sys.argv[1], sys.argv[2:]
    if name == "curl":
        argv = _curlrc() + argv
    _log(name, argv)
    handler = HANDLERS.get(name)
    return 0 if handler is None else handler(argv, _config())


if __name__ == "__main__":
    sys.exit(main())

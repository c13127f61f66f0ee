"""Runs INSIDE a job container (``python3 -S -c <this file> <abstract-name> <loopback-port>``).

It looks at the container from the job's point of view and prints one JSON object of facts;
the tests assert on them. Standard library only, like the runner.
"""

import errno
import hashlib
import json
import os
import resource
import socket
import subprocess
import sys


def error_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc))


def try_write(path: str) -> str:
    try:
        with open(path, "w") as handle:
            handle.write("x")
    except OSError as exc:
        return error_name(exc)
    return "written"


def try_exec(directory: str) -> str:
    path = os.path.join(directory, "probe.sh")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\necho ran\n")
    os.chmod(path, 0o755)
    try:
        done = subprocess.run([path], capture_output=True, timeout=10, check=False)
    except OSError as exc:
        return error_name(exc)
    return done.stdout.decode().strip()


def try_connect(family: int, address: str | tuple[str, int]) -> str:
    conn = socket.socket(family, socket.SOCK_STREAM)
    conn.settimeout(3)
    try:
        conn.connect(address)
    except OSError as exc:
        return error_name(exc) if exc.errno else type(exc).__name__
    finally:
        conn.close()
    return "connected"


def read_first(*paths: str) -> str | None:
    for path in paths:
        try:
            with open(path) as handle:
                return handle.read().strip()
        except OSError:
            continue
    return None


def mounts() -> dict[str, dict[str, str]]:
    table = {}
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields = left.split()
            fstype, source, super_options = (right.split() + ["", "", ""])[:3]
            table[fields[4]] = {
                "options": fields[5],
                "fstype": fstype,
                "source": source,
                "super": super_options,
            }
    return table


def main() -> None:
    abstract_name, loopback_port = sys.argv[1], int(sys.argv[2])
    payload = sys.stdin.buffer.read()
    facts: dict[str, object] = {
        "stdin_len": len(payload),
        "stdin_sha256": hashlib.sha256(payload).hexdigest(),
        "pid": os.getpid(),
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "core_limit": list(resource.getrlimit(resource.RLIMIT_CORE)),
    }
    with open("/proc/self/status") as handle:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)
    facts["status"] = {
        key: status.get(key, "").strip()
        for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
    }
    with open("/proc/1/cmdline", "rb") as handle:
        facts["pid1_cmdline"] = [arg.decode() for arg in handle.read().split(b"\0") if arg]
    facts["write"] = {
        path: try_write(path)
        for path in (
            "/probe",
            "/etc/probe",
            "/opt/forge-ci/probe",
            "/run/forge-ci/probe",
            "/tmp/probe",
            "/workspace/probe",
        )
    }
    facts["workspace_owner"] = [os.stat("/workspace").st_uid, os.stat("/workspace").st_gid]
    facts["exec"] = {"/tmp": try_exec("/tmp"), "/workspace": try_exec("/workspace")}
    facts["docker_sockets"] = [
        path for path in ("/var/run/docker.sock", "/run/docker.sock") if os.path.exists(path)
    ]
    facts["run_forge_ci"] = sorted(os.listdir("/run/forge-ci"))
    facts["net"] = sorted(os.listdir("/sys/class/net"))
    facts["mounts"] = mounts()
    facts["cgroup_memory"] = read_first(
        "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"
    )
    facts["cgroup_memsw"] = read_first(
        "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes", "/sys/fs/cgroup/memory.swap.max"
    )
    facts["cgroup_pids"] = read_first("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max")

    # The runner API socket: the one door that must open.
    api = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    api.settimeout(10)
    api.connect(os.environ["FORGE_CI_RUNNER_SOCKET"])
    api.sendall(b"ping from job\n")
    facts["api_reply"] = api.recv(100).decode()
    api.close()

    # Everything else must stay shut. None of these can put a packet on a real network: with
    # network "none" there is no route, and loopback is the container's own.
    facts["reach"] = {
        "host_abstract_socket": try_connect(socket.AF_UNIX, "\0" + abstract_name),
        "loopback_port_of_host": try_connect(socket.AF_INET, ("127.0.0.1", loopback_port)),
        "docker_bridge_gateway": try_connect(socket.AF_INET, ("172.17.0.1", loopback_port)),
    }
    print(json.dumps(facts))


main()

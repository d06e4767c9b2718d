#!/usr/bin/env python3
"""One limactl scenario, without a boot, as agt sees it.  Run once against the real limactl
and once against tests/fakes/limactl (tests/lima/contract.sh compares the two): prints one
JSON object per step, {"step", "what": {...}}, with this run's paths replaced by $T.

What is recorded is what agt reads: exit codes; the fields of `list --json` that
host/lima.c reads; the fatal and error log lines (agt quotes them); whether a missing
instance is reported the way agt recognises ("No instance matching"); and agt's own
output, exit code and error lines for the commands that drive limactl.

Usage: contract.py LIMACTL AGT T   (T: a directory of this user's, holding src/ and image.qcow2)
"""
import json
import os
import subprocess
import sys

LIMACTL, AGT, T = sys.argv[1:4]
HOME = os.path.join(T, "lima")
VM = "agt_agent_sandbox"
READ = ["name", "status", "dir", "vmType", "arch", "cpus", "memory", "disk", "sshLocalPort",
        "sshAddress", "IdentityFile", "hostAgentPID", "driverPID", "errors", "message",
        "limaVersion", "protected"]
env = dict(os.environ, LIMA_HOME=HOME, AGT_CONFIG=os.path.join(T, "config.yaml"))


def norm(s):
    return s.replace(T, "$T") if isinstance(s, str) else s


def deep_norm(v):
    if isinstance(v, dict):
        return {k: deep_norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [deep_norm(x) for x in v]
    return norm(v)


def emit(step, what):
    print(json.dumps({"step": step, "what": deep_norm(what)}, sort_keys=True), flush=True)


def logs(err):
    out = []
    for line in err.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            out.append(["text", line])
            continue
        if o.get("level") in ("fatal", "error", "panic"):
            out.append([o["level"], o.get("msg")])
    return out


def limactl(step, *args):
    p = subprocess.run([LIMACTL, "--tty=false", "--log-format=json"] + list(args), env=env,
                       cwd=T, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    what = {"rc": p.returncode, "log": logs(p.stderr),
            "missing": "No instance matching" in p.stderr}
    if args[0] == "list":
        insts = []
        for line in p.stdout.splitlines():
            o = json.loads(line)
            f = {k: o.get(k, "<absent>") for k in READ}
            f["config.user.name"] = ((o.get("config") or {}).get("user") or {}).get("name", "<absent>")
            insts.append(f)
        what["instances"] = insts
    emit(step, what)
    return p


def agt(step, *args):
    p = subprocess.run([AGT] + list(args), env=env, cwd=T, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    what = {"rc": p.returncode,
            "err": [l for l in p.stderr.splitlines() if not l.startswith("agt: vm: ")]}
    if "--json" in args:
        what["out"] = json.loads(p.stdout) if p.returncode == 0 else p.stdout
    else:
        what["out"] = p.stdout.splitlines()
    emit(step, what)
    return p


def config(image):
    with open(os.path.join(T, "config.yaml"), "w") as f:
        f.write("vm:\n  template: %s/src/lima/agt.yaml\n  agt_source: %s/src\n"
                "  image: %s\n  cpus: 2\n  memory: 2GiB\n  disk: 4GiB\n"
                "lima:\n  limactl: %s\n" % (T, T, image, LIMACTL))


config(os.path.join(T, "image.qcow2"))
p = subprocess.run([LIMACTL, "--version"], capture_output=True, text=True)
emit("version", {"rc": p.returncode, "out": p.stdout.strip()})
limactl("list, none", "list", "--json")
limactl("list a missing one", "list", "--json", VM)
agt("agt status, none", "status", "--json")
agt("agt up --no-start", "up", "--no-start")
limactl("list after create", "list", "--json", VM)
agt("agt status, stopped", "status", "--json")
limactl("create again", "create", "--name=" + VM, os.path.join(T, "src/lima/agt.yaml"))
limactl("stop a stopped one", "stop", VM)
limactl("stop --force a stopped one", "stop", "--force", VM)
agt("agt stop, stopped", "stop")
agt("agt jail ls, stopped", "jail", "ls")
limactl("clone", "clone", VM, "gold")
limactl("list both", "list", "--json")
limactl("clone onto an existing one", "clone", VM, "gold")
limactl("clone a missing one", "clone", "nosuch", "gold2")
limactl("rename a missing one", "rename", "nosuch", "other")
limactl("rename onto an existing one", "rename", "gold", VM)
limactl("rename", "rename", "gold", "gold1")
limactl("rename back", "rename", "gold1", "gold")
agt("agt clone", "clone", "gold2")
agt("agt clone onto an existing one", "clone", "gold2")
limactl("protect", "protect", VM)
limactl("list protected", "list", "--json", VM)
limactl("delete a protected one", "delete", "--force", VM)
limactl("factory-reset a protected one", "factory-reset", VM)
agt("agt delete, protected", "delete", "--force")
limactl("unprotect", "unprotect", VM)
agt("agt reset --force", "reset", "--force")
limactl("list after reset", "list", "--json", VM)
limactl("factory-reset a missing one", "factory-reset", "nosuch")
limactl("delete a missing one", "delete", "nosuch")
agt("agt restore --force --no-start gold", "restore", "--force", "--no-start", "gold")
limactl("list after restore", "list", "--json")
os.mkdir(os.path.join(HOME, "broken"))
limactl("list a directory without lima.yaml", "list", "--json", "broken")
limactl("delete a directory without lima.yaml", "delete", "--force", "broken")
agt("agt restore from it", "restore", "--force", "broken")
os.rmdir(os.path.join(HOME, "broken"))
limactl("delete a stopped one without --force", "delete", "gold2")
agt("agt delete --force", "delete", "--force")
agt("agt --instance gold delete --force", "--instance", "gold", "delete", "--force")
limactl("list, none left", "list", "--json")
config(os.path.join(T, "no-such-image.qcow2"))
agt("agt up, an image that cannot be had", "up")
limactl("list after the failed create", "list", "--json")
subprocess.run([AGT, "template", "-o", os.path.join(T, "missing.yaml")], env=env, check=True)
limactl("create from an image that cannot be had", "create", "--name=m1", os.path.join(T, "missing.yaml"))
limactl("list what the failed create left", "list", "--json", "m1")
limactl("delete it", "delete", "--force", "m1")

#!/usr/bin/env bash
# docs/HOST.md against agt's --help: for each row of its command table, `agt CMD --help`
# exits 0 with a usage line; every long option the row names is one that command (or agt
# itself) takes; every long option the command's --help lists is named in its row (a row
# saying "as `run` would" is checked against run's).  The table and the help are generated
# from different places, so this is what keeps them from drifting.  The same for README's
# table of recipes against the justfile's: each recipe in it, and no other.
set -u
: "${AGT:?AGT must name the agt binary (meson sets it)}"
SRCDIR=${SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
export AGT_TARGET=local AGT_CONFIG=/dev/null
exec python3 - "$AGT" "$SRCDIR/docs/HOST.md" "$SRCDIR" <<'PY'
import re, subprocess, sys

agt, doc, srcdir = sys.argv[1], sys.argv[2], sys.argv[3]
n = failed = 0

def result(good, what, detail=""):
    global n, failed
    n += 1
    if not good:
        failed += 1
    print(("ok" if good else "not ok") + " %d - %s" % (n, what))
    if not good and detail:
        print("#   " + detail)

def helptext(words):
    p = subprocess.run([agt] + words + ["--help"], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr

def long_opts(text):
    # an option after "-- " is the agent's or the command's, not agt's
    return set(re.findall(r"(?<![\w-])(?<!-- )(--[a-z][a-z0-9-]*)", text))

def shorts(text):
    """--long -> -x, from the help's "-x, --long" lines"""
    return dict((l, s) for s, l in re.findall(r"^\s+(-\w), (--[a-z][a-z0-9-]*)", text, re.M))

rc, top = helptext([])
globals_ = long_opts(top)
rows = {}
order = []
for line in open(doc):
    if not line.startswith("| `agt "):
        continue
    first, rest = line.split("|")[1], "|".join(line.split("|")[2:])
    for usage in re.findall(r"`(agt [^`]*)`", first):
        words = []
        for w in usage.split()[1:]:
            if re.fullmatch(r"[a-z][a-z-]*", w):
                words.append(w)
            else:
                break
        key = " ".join(words)
        if key and key not in rows:
            rows[key] = line
            order.append(key)

result(len(order) >= 20, "docs/HOST.md's table names the commands (%d)" % len(order))
for key in order:
    words = key.split()
    rc, text = helptext(words)
    result(rc == 0 and re.search(r"^usage: agt", text, re.M) is not None,
           "agt %s --help exits 0 with a usage line" % key, "rc %d: %s" % (rc, text[:200]))
    helped = long_opts(text) - {"--help"}
    row = rows[key]
    named = long_opts(row) - {"--help"}
    extra = sorted(o for o in named - helped - globals_)
    result(not extra, "every option docs/HOST.md names for agt %s is one it takes" % key,
           "not in --help: " + " ".join(extra))
    m = re.search(r"as `(\w+)` would", row)
    ref = rows.get(" ".join(words[:-1] + [m.group(1)])) if m else None
    short = shorts(text)
    against = ref or row
    missing = sorted(o for o in helped - long_opts(against)
                     if not (o in short and re.search(r"(?<![\w-])%s(?![\w-])" % short[o], against)))
    result(not missing, "every option of agt %s --help is in docs/HOST.md" % key,
           "not in the row: " + " ".join(missing))
recipes = set(re.findall(r"^([a-z][a-z0-9-]*)(?:\s[^:]*)?:(?!=)", open(srcdir + "/justfile").read(), re.M))
table = set(re.findall(r"^\| `just ([a-z][a-z0-9-]*)", open(srcdir + "/README.md").read(), re.M))
result(len(recipes) >= 10, "the justfile's recipes are found (%d)" % len(recipes))
result(not recipes - table, "every recipe of the justfile is in README's table of recipes",
       "missing: " + " ".join(sorted(recipes - table)))
result(not table - recipes, "README's table of recipes names only recipes of the justfile",
       "not recipes: " + " ".join(sorted(table - recipes)))
print("1..%d" % n)
sys.exit(1 if failed else 0)
PY

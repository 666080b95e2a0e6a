#!/usr/bin/env python3
"""Every markdown link in the repository resolves, and nothing points outside it.

Checks, over the files git tracks or would track (or, outside a git
checkout, every file but build outputs and node_modules):

  * a relative link in a markdown file names a file or folder that exists;
  * a link's #anchor names a heading (or an explicit anchor) of its target
    markdown file, or of the file itself for a bare #anchor;
  * no text or code file points at a path beside the repository
    ("../shared/...") or at a tracker entry ("issue 16", "issue #20"),
    which a reader of the project cannot open.

Usage: links_test.py [REPO_ROOT]   (default: two folders above this file)
Exit 0 when everything resolves; 1 with one line per problem otherwise.
"""
import os
import re
import subprocess
import sys
import unicodedata

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SELF = os.path.relpath(os.path.abspath(__file__), ROOT)

# Built so that this file does not match its own patterns.
OUTSIDE = re.compile(r"\.\./" + "shared" + r"\b")
TRACKER = re.compile(r"\b" + "issue" + r"s? #?[0-9]", re.IGNORECASE)
TEXT_EXT = {".md", ".cc", ".h", ".cu", ".cuh", ".c", ".py", ".sh", ".txt", ".cmake", ".proto",
            ".js", ".mjs", ".html", ".css", ".toml", ".yml", ".yaml", ".json", ".in", ""}
SKIP_DIRS = {".git", "node_modules", "my_work", "runs"}


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True,
                             check=True).stdout.decode()
        return [f for f in out.split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
        return files


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"<[^>]+>", "", heading)                 # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = text.replace("`", "").strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def strip_code(lines, spans=True):
    """The lines with code blocks blanked and, with `spans`, inline code removed."""
    out, fence = [], None
    for line in lines:
        m = re.match(r"^\s*(`{3,}|~{3,})", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * len(m.group(1))
            elif m.group(1).startswith(fence):
                fence = None
            out.append("")
            continue
        if fence is not None or re.match(r"^( {4}|\t)", line) and not line.strip().startswith(("*", "-", "|")) and out and out[-1] == "":
            out.append("")
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line) if spans else line)
    return out


_anchor_cache = {}


def anchors(path):
    if path in _anchor_cache:
        return _anchor_cache[path]
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = strip_code(f.read().split("\n"), spans=False)
    found, seen = set(), {}
    for line in lines:
        m = re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        for a in re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
            found.add(a)
    _anchor_cache[path] = found
    return found


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")


def check_markdown(rel, problems):
    path = os.path.join(ROOT, rel)
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = strip_code(f.read().split("\n"))
    for no, line in enumerate(lines, 1):
        targets = LINK.findall(line)
        m = REFDEF.match(line)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            if file_part:
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                if not os.path.exists(dest):
                    problems.append(f"{rel}:{no}: link to a missing file: {target}")
                    continue
                if not os.path.realpath(dest).startswith(os.path.realpath(ROOT) + os.sep):
                    problems.append(f"{rel}:{no}: link outside the repository: {target}")
                    continue
            else:
                dest = path
            if anchor and dest.endswith(".md") and os.path.isfile(dest):
                if anchor not in anchors(dest):
                    problems.append(f"{rel}:{no}: no heading for #{anchor} in "
                                    f"{os.path.relpath(dest, ROOT)}")


def check_text(rel, problems):
    if os.path.splitext(rel)[1] not in TEXT_EXT or rel == SELF:
        return
    try:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
    except (UnicodeDecodeError, OSError):
        return
    for no, line in enumerate(text.split("\n"), 1):
        if OUTSIDE.search(line):
            problems.append(f"{rel}:{no}: points outside the repository: {line.strip()[:100]}")
        if TRACKER.search(line):
            problems.append(f"{rel}:{no}: names a tracker entry: {line.strip()[:100]}")


def main():
    problems = []
    files = tracked_files()
    for rel in files:
        if any(part in SKIP_DIRS for part in rel.split("/")):
            continue
        if rel.endswith(".md"):
            check_markdown(rel, problems)
        check_text(rel, problems)
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s) in {len(files)} files", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

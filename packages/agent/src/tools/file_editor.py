# The file_editor tool, run inside the sandbox by tools/file-editor.ts (once per action).
# Prints what the model sees; exits 0 on success, 2 on an error the model should correct.
import hashlib
import json
import os
import sys

STATE = "/tmp/tern-tools/history"
SNIPPET = 4
MAX_VIEW = 16000


def fail(msg):
    print(msg)
    sys.exit(2)


def numbered(text, start=1):
    lines = text.split("\n")
    return "\n".join(f"{i + start:6}\t{line}" for i, line in enumerate(lines))


def history_dir(path):
    return os.path.join(STATE, hashlib.sha256(path.encode()).hexdigest())


def save_history(path):
    d = history_dir(path)
    os.makedirs(d, exist_ok=True)
    n = len(os.listdir(d))
    with open(os.path.join(d, f"{n:06}"), "wb") as f:
        if os.path.exists(path):
            f.write(b"F")
            with open(path, "rb") as src:
                f.write(src.read())
        else:
            f.write(b"N")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def snippet(text, line):
    lines = text.split("\n")
    lo = max(0, line - SNIPPET)
    hi = min(len(lines), line + SNIPPET + 1)
    return numbered("\n".join(lines[lo:hi]), lo + 1)


def view(path, view_range):
    if os.path.isdir(path):
        if view_range:
            fail("view_range is not allowed when path is a directory.")
        out = []
        for root, dirs, files in os.walk(path):
            depth = root[len(path):].count(os.sep)
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            if depth >= 2:
                dirs[:] = []
            for name in sorted(dirs):
                out.append(os.path.join(root, name) + "/")
            for name in sorted(files):
                if not name.startswith("."):
                    out.append(os.path.join(root, name))
        print(f"Here's the files and directories up to 2 levels deep in {path}, excluding hidden items:")
        print("\n".join([path + "/"] + sorted(out)))
        return
    text = read(path)
    lines = text.split("\n")
    start, end = 1, len(lines)
    if view_range:
        start, end = view_range[0], view_range[1]
        if end == -1:
            end = len(lines)
        if start < 1 or start > len(lines) or end < start or end > len(lines):
            fail(f"Invalid view_range {view_range}: the file has {len(lines)} lines; use [start, end] with 1 <= start <= end <= {len(lines)}, or end -1.")
    shown = numbered("\n".join(lines[start - 1:end]), start)
    if len(shown) > MAX_VIEW:
        shown = shown[:MAX_VIEW] + "\n[... file cut: use view_range to see the rest ...]"
    print(f"Here's the result of running `cat -n` on {path}:")
    print(shown)


def main(args):
    cmd = args["command"]
    path = os.path.normpath(args["path"])
    workspace = os.path.realpath(args["workspace"])
    real = os.path.realpath(path)
    if real != workspace and not real.startswith(workspace + os.sep):
        fail(f"The path {path} is outside the workspace {workspace}.")
    exists = os.path.exists(path)
    if cmd == "view":
        if not exists:
            fail(f"The path {path} does not exist.")
        view(path, args.get("view_range"))
    elif cmd == "create":
        if exists:
            fail(f"File already exists at {path}. Cannot overwrite files using command `create`; use `str_replace`.")
        save_history(path)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write(path, args["file_text"])
        print(f"File created successfully at: {path}")
    elif cmd == "str_replace":
        if not exists or os.path.isdir(path):
            fail(f"The path {path} does not exist or is a directory.")
        old, new = args["old_str"], args.get("new_str") or ""
        text = read(path)
        count = text.count(old)
        if count == 0:
            fail(f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}.")
        if count > 1:
            lines = [i + 1 for i, l in enumerate(text.split("\n")) if old.split("\n")[0] in l]
            fail(f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines {lines}. Please ensure it is unique.")
        save_history(path)
        at = text.index(old)
        updated = text.replace(old, new, 1)
        write(path, updated)
        line = text[:at].count("\n")
        print(f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:")
        print(snippet(updated, line))
        print("Review the changes and make sure they are as expected. Edit the file again if necessary.")
    elif cmd == "insert":
        if not exists or os.path.isdir(path):
            fail(f"The path {path} does not exist or is a directory.")
        text = read(path)
        lines = text.split("\n")
        n = args["insert_line"]
        if n < 0 or n > len(lines):
            fail(f"Invalid insert_line {n}: it should be within [0, {len(lines)}].")
        save_history(path)
        new_lines = args["new_str"].split("\n")
        updated = "\n".join(lines[:n] + new_lines + lines[n:])
        write(path, updated)
        print(f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of the edited file:")
        print(snippet(updated, n))
        print("Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.")
    elif cmd == "undo_edit":
        d = history_dir(path)
        entries = sorted(os.listdir(d)) if os.path.isdir(d) else []
        if not entries:
            fail(f"No edit history found for {path}.")
        last = os.path.join(d, entries[-1])
        with open(last, "rb") as f:
            saved = f.read()
        if saved[:1] == b"N":
            if os.path.exists(path):
                os.remove(path)
            print(f"Last edit to {path} undone successfully: the file no longer exists.")
        else:
            with open(path, "wb") as f:
                f.write(saved[1:])
            print(f"Last edit to {path} undone successfully. Here's the result of running `cat -n` on {path}:")
            print(numbered(read(path)))
        os.remove(last)
    else:
        fail(f"Unknown command {cmd}.")

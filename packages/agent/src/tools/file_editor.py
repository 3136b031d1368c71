# The file_editor tool, run inside the sandbox by tools/execute.ts (once per action), with the
# standard library only (the sandbox image has no charset detector).
# Prints what the model sees; exits 0 on success, 2 on an error the model should correct.
# An image viewed is printed as a line of text, then `<image_marker> <mime>` and its base64 on the
# next lines: the caller turns that into an image block.
import base64
import hashlib
import os
import sys
import tempfile

STATE = "/tmp/tern-tools/history"
HISTORY_PER_FILE = 10
SNIPPET = 4
MAX_VIEW = 16000
MAX_FILE_BYTES = 10 * 1024 * 1024
# Anthropic refuses images over 5 MB; OpenAI's limit is higher.
MAX_IMAGE_BYTES = 5 * 1024 * 1024
SAMPLE_BYTES = 8192

TEXT_CLIPPED = (
    "<response clipped><NOTE>Only part of this file was shown, to keep the output short. Search inside it "
    "with `grep -n` to find the lines you need, then view them with `view_range`.</NOTE>"
)
DIR_CLIPPED = (
    "<response clipped><NOTE>Only part of this directory was shown, to keep the output short. Use "
    "`ls -la` or `find` with filters to list it piece by piece.</NOTE>"
)

# Which image formats the models take, known by their first bytes rather than their name.
IMAGE_EXTENSIONS = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}


def fail(msg):
    print(msg)
    sys.exit(2)


def image_mime(head):
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"GIF87a") or head.startswith(b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def numbered(text, start=1):
    lines = text.split("\n")
    return "\n".join(f"{i + start:6}\t{line}" for i, line in enumerate(lines))


def clip(text, notice):
    if len(text) <= MAX_VIEW:
        return text
    return text[:MAX_VIEW] + "\n" + notice


# --- what a file holds: its size, whether it is text, and in which encoding --------------------

def check_size(path):
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        fail(
            f"The file {path} is too large ({size / 1024 / 1024:.1f} MB); this tool reads files up to "
            f"{MAX_FILE_BYTES // 1024 // 1024} MB. Use `head`, `tail`, `grep -n` or `sed -n` in the terminal instead."
        )


CONTROL = set(range(0, 32)) - {9, 10, 12, 13, 27, 8}


def looks_binary(data):
    """NUL bytes, or many control bytes, in a sample that is not UTF-16 (whose text holds NULs)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    if b"\x00" in data:
        return True
    if not data:
        return False
    control = sum(1 for b in data if b in CONTROL)
    return control / len(data) > 0.1


def decode(data):
    """The text and the encoding it was read with: UTF-8 (with or without BOM), UTF-16 by its
    BOM, else Windows-1252 when its C1 bytes read as such, else Latin-1 (which reads any byte, so
    writing back gives the same bytes for every character left unchanged)."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="strict"), "utf-8-sig"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16"), "utf-16"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    if any(0x80 <= b <= 0x9F for b in data):
        try:
            return data.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:
            pass
    return data.decode("latin-1"), "latin-1"


class TextFile:
    """A text file as the model sees it: LF line ends, whatever the file has; written back with its
    own encoding and line ends."""

    def __init__(self, path):
        check_size(path)
        with open(path, "rb") as f:
            data = f.read()
        if looks_binary(data[:SAMPLE_BYTES]):
            fail(
                f"The file {path} appears to be binary; this tool reads and edits text files only. "
                "Inspect it with the terminal (`file`, `xxd | head`, or a Python script)."
            )
        try:
            self.text, self.encoding = decode(data)
        except UnicodeDecodeError as e:
            fail(f"The file {path} cannot be decoded as text ({e}).")
        self.crlf = "\r\n" in self.text and self.text.count("\r\n") == self.text.count("\n")
        if self.crlf:
            self.text = self.text.replace("\r\n", "\n")
        self.path = path

    def write(self, text):
        """Writes `text` back; returns a note when the encoding had to change."""
        out = text.replace("\n", "\r\n") if self.crlf else text
        note = ""
        encoding = self.encoding
        try:
            data = out.encode(encoding)
        except UnicodeEncodeError:
            data = out.encode("utf-8")
            note = (
                f"\nNote: the file was {self.encoding}, which cannot hold the new text's characters; "
                "it is now saved as UTF-8."
            )
            self.encoding = "utf-8"
        write_bytes(self.path, data)
        self.text = text
        return note


def write_bytes(path, data):
    """Writes through a temporary file beside `path`, renamed over it, so a failed write never
    leaves the file half written; the file keeps its permission bits."""
    directory = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError:
        # A directory we may not create files in, holding a file we may write: write in place.
        with open(path, "wb") as f:
            f.write(data)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --- undo history: the file's bytes before each edit, kept in the sandbox --------------------

def history_dir(path):
    return os.path.join(STATE, hashlib.sha256(path.encode()).hexdigest())


def save_history(path):
    d = history_dir(path)
    os.makedirs(d, exist_ok=True)
    entries = sorted(os.listdir(d))
    n = int(entries[-1]) + 1 if entries else 0
    with open(os.path.join(d, f"{n:06}"), "wb") as f:
        if os.path.exists(path):
            f.write(b"F")
            with open(path, "rb") as src:
                f.write(src.read())
        else:
            f.write(b"N")
    for old in entries[: max(0, len(entries) + 1 - HISTORY_PER_FILE)]:
        os.remove(os.path.join(d, old))


def snippet(text, first_line, extra_lines=0):
    """The lines around `first_line` (0-based), `extra_lines` more below it."""
    lines = text.split("\n")
    lo = max(0, first_line - SNIPPET)
    hi = min(len(lines), first_line + SNIPPET + extra_lines + 1)
    return numbered("\n".join(lines[lo:hi]), lo + 1)


# --- the commands ------------------------------------------------------------------------------

def view_directory(path):
    def visible(d):
        try:
            return sorted(e for e in os.listdir(d) if not e.startswith("."))
        except OSError:
            return []

    try:
        hidden = sum(1 for e in os.listdir(path) if e.startswith("."))
    except OSError as e:
        fail(f"Cannot list {path}: {e.strerror}.")
    out = [path.rstrip("/") + "/"]
    for name in visible(path):
        child = os.path.join(path, name)
        if os.path.isdir(child):
            out.append(child + "/")
            for sub in visible(child):
                grandchild = os.path.join(child, sub)
                out.append(grandchild + ("/" if os.path.isdir(grandchild) else ""))
        else:
            out.append(child)
    msg = f"Here's the files and directories up to 2 levels deep in {path}, excluding hidden items:\n" + "\n".join(out)
    if hidden:
        msg += f"\n\n{hidden} hidden files/directories in this directory are excluded. You can use 'ls -la {path}' to see them."
    print(clip(msg, DIR_CLIPPED))


def view_image(path, marker):
    size = os.path.getsize(path)
    if size > MAX_IMAGE_BYTES:
        fail(
            f"The image {path} is {size / 1024 / 1024:.1f} MB; images up to {MAX_IMAGE_BYTES // 1024 // 1024} MB can "
            "be shown. Make a smaller copy (e.g. with Python's PIL, or `convert -resize`) and view that."
        )
    with open(path, "rb") as f:
        data = f.read()
    mime = image_mime(data[:16])
    if not mime:
        fail(f"The file {path} is named as an image but is not a PNG, JPEG, GIF or WebP image.")
    print(f"Image file {path} read successfully ({mime}, {size} bytes). Displaying image content.")
    print(f"{marker} {mime}")
    print(base64.b64encode(data).decode("ascii"))


def view(path, view_range, marker):
    if os.path.isdir(path):
        if view_range:
            fail("The `view_range` parameter is not allowed when `path` points to a directory.")
        view_directory(path)
        return
    if os.path.splitext(path)[1].lower() in IMAGE_EXTENSIONS and marker:
        if view_range:
            fail("The `view_range` parameter is not allowed for an image.")
        view_image(path, marker)
        return
    text = TextFile(path).text
    lines = text.split("\n")
    start, end = 1, len(lines)
    note = ""
    if view_range:
        start, end = view_range[0], view_range[1]
        if start < 1 or start > len(lines):
            fail(f"Invalid `view_range` {view_range}: its first element should be within the file's lines [1, {len(lines)}].")
        if end == -1:
            end = len(lines)
        elif end > len(lines):
            note = f"NOTE: the file has only {len(lines)} lines; showing up to line {len(lines)}.\n"
            end = len(lines)
        if end < start:
            fail(f"Invalid `view_range` {view_range}: its second element should be at least its first, or -1 for the end.")
    shown = clip(numbered("\n".join(lines[start - 1:end]), start), TEXT_CLIPPED)
    print(f"{note}Here's the result of running `cat -n` on {path}:")
    print(shown)


def str_replace(path, old, new):
    if old == new:
        fail("No replacement was performed: `new_str` and `old_str` must be different.")
    f = TextFile(path)
    text = f.text
    count = text.count(old)
    if count == 0 and old.strip() and old.strip() != old:
        # Whitespace around old_str the file does not have (a trailing newline, an indentation
        # copied from the view): match on the stripped text, and replace with new_str untouched.
        old = old.strip()
        count = text.count(old)
    if count == 0:
        fail(f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}.")
    if count > 1:
        lines, at = [], text.find(old)
        while at >= 0:
            lines.append(text.count("\n", 0, at) + 1)
            at = text.find(old, at + 1)
        fail(f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines {lines}. Please ensure it is unique.")
    save_history(path)
    at = text.index(old)
    updated = text[:at] + new + text[at + len(old):]
    note = f.write(updated)
    line = text.count("\n", 0, at)
    print(f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:")
    print(snippet(updated, line, new.count("\n")))
    print(f"Review the changes and make sure they are as expected. Edit the file again if necessary.{note}")


def insert(path, n, new):
    f = TextFile(path)
    lines = f.text.split("\n")
    if n < 0 or n > len(lines):
        fail(f"Invalid `insert_line` {n}: it should be within [0, {len(lines)}].")
    save_history(path)
    new_lines = new.split("\n")
    updated = "\n".join(lines[:n] + new_lines + lines[n:])
    note = f.write(updated)
    print(f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of the edited file:")
    print(snippet(updated, n, len(new_lines) - 1))
    print(
        "Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). "
        f"Edit the file again if necessary.{note}"
    )


def create(path, text):
    save_history(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_bytes(path, text.encode("utf-8"))
    print(f"File created successfully at: {path}")


def undo_edit(path):
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
        write_bytes(path, saved[1:])
        print(f"Last edit to {path} undone successfully. Here's the result of running `cat -n` on {path}:")
        print(clip(numbered(TextFile(path).text), TEXT_CLIPPED))
    os.remove(last)


def main(args):
    cmd = args["command"]
    path = os.path.normpath(args["path"])
    exists = os.path.exists(path)
    try:
        if cmd == "create":
            if exists:
                fail(f"File already exists at: {path}. Cannot overwrite files using command `create`; use `str_replace`, or delete it first.")
            create(path, args["file_text"])
            return
        if cmd == "undo_edit":
            undo_edit(path)
            return
        if not exists:
            fail(f"The path {path} does not exist. Please provide a valid path.")
        if cmd == "view":
            view(path, args.get("view_range"), args.get("image_marker"))
            return
        if os.path.isdir(path):
            fail(f"The path {path} is a directory and only the `view` command can be used on directories.")
        if cmd == "str_replace":
            str_replace(path, args["old_str"], args.get("new_str") or "")
        elif cmd == "insert":
            insert(path, args["insert_line"], args["new_str"])
        else:
            fail(f"Unrecognized command {cmd}. The allowed commands are: view, create, str_replace, insert, undo_edit.")
    except PermissionError as e:
        fail(f"Permission denied on {e.filename or path}: the sandbox's user may not do this here.")
    except OSError as e:
        fail(f"Ran into {e.strerror or e} on {e.filename or path}.")

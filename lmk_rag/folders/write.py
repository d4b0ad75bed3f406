"""Writing a model folder whole: built beside its destination, moved into place only when complete.

A failed write (an error, a full disk, a kill) leaves the destination as it was, never half a
folder, and ``overwrite`` never deletes the old folder before the new one exists. Shared by
``LMKEncoder.save`` / ``lmk-rag export`` and ``lmk-rag merge``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from ..encoding.checksums import file_checksum
from ..errors import InvalidInputError, ModelLoadError


def check_destination(folder: Path, *, overwrite: bool, protected: Iterable[Path] = (), what: str = "") -> None:
    """Refuse a destination that is not an empty folder (unless ``overwrite``), or that is (or
    holds) one of the ``protected`` folders, the sources being read (``what`` names them)."""
    exists = folder.exists() or folder.is_symlink()
    if exists and (not folder.is_dir() or any(folder.iterdir())) and not overwrite:
        raise InvalidInputError(
            f"{str(folder)!r} exists and is not an empty folder; pass overwrite=True (--overwrite) to replace it"
        )
    target = folder.resolve()
    for source in protected:
        source = source.resolve()
        if target == source or target in source.parents:
            raise InvalidInputError(f"{str(folder)!r} holds {what or 'a source'} ({source}); write somewhere else")
    if exists and overwrite and folder.is_dir() and any(folder.iterdir()):
        _check_replaceable(folder, target)


#: The file :func:`write_folder` leaves in every folder it writes: the list of files it wrote. It
#: is what makes a folder replaceable by ``overwrite``; nothing else is.
MANIFEST = ".lmk-rag-written.json"


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def verify_written_folder(folder: Path) -> None:
    """Check a folder :func:`write_folder` wrote against its manifest: every file it wrote that is
    still there has the same size and SHA-256 (a damaged weights or tokenizer file would load
    silently wrong; a removed one fails where it is needed).
    Folders without a manifest (written elsewhere) are not checked here."""
    try:
        files = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if not isinstance(files, dict):
        return
    for name, recorded in files.items():
        path = folder / name
        if not path.is_file():
            continue  # removed on purpose (e.g. lmk_config.json, to read it as a sentence-transformers folder)
        if (
            not isinstance(recorded, dict)
            or recorded.get("bytes") != path.stat().st_size
            or file_checksum(path) != recorded
        ):
            raise ModelLoadError(
                f"{name} in the model folder {str(folder)!r} is not the file lmk-rag wrote (its size or SHA-256 "
                "differs: damaged or edited); write the folder again (lmk-rag export) or restore it"
            )


def _check_replaceable(folder: Path, target: Path) -> None:
    """``overwrite`` replaces a folder lmk-rag wrote before (it holds :data:`MANIFEST`) and no file
    added since, nothing else: never the working directory or a folder above it, never a model
    folder from elsewhere, a project or an index."""
    cwd = Path.cwd().resolve()
    if target == cwd or target in cwd.parents:
        raise InvalidInputError(
            f"{str(folder)!r} is the working directory or a folder above it; --overwrite replaces a model "
            "folder written before, so give the model folder itself (e.g. out/my-model)"
        )
    try:
        written = set(json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InvalidInputError(
            f"{str(folder)!r} is not a model folder lmk-rag wrote (it has no {MANIFEST}), so --overwrite will "
            "not replace it: give a new or empty folder, or remove this one yourself"
        ) from None
    added = sorted(_files(folder) - written - {MANIFEST})
    if added:
        raise InvalidInputError(
            f"{str(folder)!r} holds files lmk-rag did not write ({', '.join(added[:3])}"
            f"{', ...' if len(added) > 3 else ''}), so --overwrite will not replace it: move them, or give "
            "a new or empty folder"
        )


def _umask() -> int:
    """The process's umask, read without changing it where the OS allows (Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at once
    os.umask(mask)
    return mask


def open_permissions(folder: Path) -> None:
    """Give ``folder`` and everything in it the modes a plain ``open()`` / ``mkdir()`` gives
    (0666 / 0777 less the umask). ``tempfile.mkdtemp`` and safetensors create theirs private
    (0700 / 0600), so a model folder written by one user (a build job, a container's uid) could not
    be read by another (the server that loads it)."""
    mask = _umask()
    for path in (folder, *folder.rglob("*")):
        if path.is_symlink():
            continue
        mode = 0o777 if path.is_dir() else 0o666 | (path.stat().st_mode & 0o111)
        path.chmod(mode & ~mask)


def write_folder(
    folder: Path,
    write: Callable[[Path], None],
    *,
    overwrite: bool,
    protected: Iterable[Path] = (),
    what: str = "",
) -> Path:
    """Check the destination (:func:`check_destination`), call ``write(staging)`` on an empty
    sibling folder, open its permissions (:func:`open_permissions`), then move it to ``folder``
    (the old one, if any, removed after)."""
    protected = list(protected)
    check_destination(folder, overwrite=overwrite, protected=protected, what=what)
    exists = folder.exists() or folder.is_symlink()
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        write(staging)
        files = {name: file_checksum(staging / name) for name in sorted(_files(staging))}
        (staging / MANIFEST).write_text(json.dumps({"files": files}, indent=1), encoding="utf-8")
        open_permissions(staging)
        if exists:
            old = staging.with_name(staging.name + ".old")
            folder.rename(old)
            staging.rename(folder)
            shutil.rmtree(old) if old.is_dir() and not old.is_symlink() else old.unlink()
        else:
            staging.rename(folder)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return folder

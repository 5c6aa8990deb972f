"""Assemble the operator image's root filesystem (run in the Containerfile's build stage).

The run stage is `FROM scratch` plus this root: the virtual environment, the Python
interpreter it was made with and its standard library (without the parts an operator
never imports: tests, IDLE, Tk, lib2to3, ensurepip), the shared libraries all of them
load (found with ldd), a shell and the few tools a job script or a debugging session
needs, the CA certificates, and the non-root user. Nothing else of the base (apt, dpkg,
perl, ...) is copied: about 90 MB instead of the base's 185 MB plus the environment.
Only the standard library is used, and nothing is specific to one base: Debian's
python3 (/usr/bin, /usr/lib/python3.11) and the official Python image's (/usr/local)
both work.

    python3 scripts/image_root.py /rootfs /opt/venv
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

#: The shell and tools kept: job scripts on this image (`sh -c "echo ...; sleep 5"`),
#: the /manager shim, and a look inside a running container.
TOOLS = ("sh", "cat", "echo", "env", "head", "id", "ls", "sleep", "touch")
#: Standard-library packages an operator never imports (about 30 MB with their .pyc).
UNUSED_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}
#: The base's own packages (the environment has its own) and its build configuration.
NOT_STDLIB = re.compile(r"site-packages|dist-packages|config-.*")
#: Directories a merged-/usr base links to /usr; kept as links so library paths agree.
MERGED_USR = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
CERTIFICATES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/openssl.cnf", "/usr/lib/ssl")
USER = "tfjob:x:65532:65532:tfjob:/nonexistent:/usr/sbin/nologin"
LDD_PATH = re.compile(r"(/\S+) \(0x")


def main(root: Path, venv: Path) -> None:
    root.mkdir(parents=True)
    for name in MERGED_USR:
        top = Path("/") / name
        if top.is_symlink():  # relative inside the root, never to the build's own /usr
            link = os.path.relpath(top.resolve(), "/")
            (root / link).mkdir(parents=True, exist_ok=True)
            (root / name).symlink_to(link)
    shutil.copytree(venv, root / venv.relative_to("/"), symlinks=True)
    interpreter = venv / "bin" / "python3"
    copy(root, interpreter)  # the links from the environment to the interpreter
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(
        stdlib,
        root / stdlib.relative_to("/"),
        symlinks=True,
        ignore=lambda folder, names: unused(names) if folder == str(stdlib) else set(),
        dirs_exist_ok=True,
    )
    tools = [Path(found) for tool in TOOLS if (found := shutil.which(tool))]
    for tool in [*tools, Path("/bin/sh")]:
        copy(root, tool)
    binaries = [interpreter.resolve(), *tools, *root.rglob("*.so")]
    for library in sorted({lib for binary in binaries for lib in libraries(binary)}):
        copy(root, library)
    for path in CERTIFICATES:
        if os.path.lexists(path):
            copy(root, Path(path))
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(f"root:x:0:0:root:/root:/usr/sbin/nologin\n{USER}\n")
    (etc / "group").write_text("root:x:0:\ntfjob:x:65532:\n")
    tmp = root / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    # Where Kubeflow's image keeps its binary: a Deployment written for it runs unchanged.
    manager = root / "manager"
    manager.write_text(f'#!/bin/sh\nexec {venv}/bin/tfjob operator "$@"\n')
    manager.chmod(0o755)
    copy_licenses(root)


def unused(names: list[str]) -> set[str]:
    """What of the standard library's top folder the image leaves out."""
    return {name for name in names if name in UNUSED_STDLIB or NOT_STDLIB.fullmatch(name)}


def libraries(binary: Path) -> list[Path]:
    """The shared libraries `binary` loads, the dynamic loader included (none for a
    file ldd does not take, such as a script)."""
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    return [Path(found) for found in LDD_PATH.findall(done.stdout)] if done.returncode == 0 else []


def copy(root: Path, path: Path) -> None:
    """`path` into `root` at the same place, with every symlink on the way to the file
    it names (a symlink's target is copied too, relative links kept relative)."""
    target = root / path.relative_to("/")
    if path.is_symlink():  # followed even when copied already, to reach the file
        link = os.readlink(path)
        if not os.path.lexists(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(link)
        copy(root, Path(os.path.normpath(path.parent / link)))
        return
    if os.path.lexists(target):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        shutil.copytree(path, target, symlinks=True)
    else:
        shutil.copy2(path, target)


def copy_licenses(root: Path) -> None:
    """Every copyright notice the base's packages left in /usr/share/doc (a few MB;
    a base without them has none to copy)."""
    for notice in Path("/usr/share/doc").glob("*/copyright"):
        copy(root, notice)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

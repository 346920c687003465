"""Builds the images Kubeflow's TFJob e2e test and examples name, locally, and loads them into
the local node's containerd (run by hack/tfjob-images.sh, under the cluster lock).

Each is its example's own Dockerfile (kubeflow.Recipe) applied on tfmw-trainer:dev instead of
its FROM, over one shared layer (tests/tfjob/offline):
  - tfjob_offline_data (+ a .pth that loads it): keras' mnist.load_data reads
    /opt/tfjob-offline/mnist.npz instead of downloading MNIST;
  - tensorflow_datasets: a stand-in whose load("mnist") reads the same file;
  - /opt/tfjob-offline/mnist.npz: scikit-learn's digits in MNIST's shapes (make_mnist.py);
  - /train and /logs, writable by everyone: the examples write there, and the images run as
    the trainer image's user (uid 1000), where the originals ran as root.
A build is reused while its inputs are unchanged (the base image, the module version, these
files); an image already in containerd is not imported again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from tfjob.upstream import REPO, Recipe, module_dir, pinned_version, recipes

BASE = "tfmw-trainer:dev"
OFFLINE = Path(__file__).resolve().parent / "offline"
CLUSTER_DIR = Path(os.environ.get("TFMW_CLUSTER_DIR") or REPO / ".cluster")
STAMPS = REPO / ".tfjob" / "images"
WRITABLE = ("/train", "/logs")
# Run in the built layer, as the images' user: MNIST through Keras and through the
# TensorFlow Datasets stand-in, in the shapes and types the examples expect.
OFFLINE_CHECK = """
import tensorflow as tf, tensorflow_datasets as tfds
from tensorflow.keras.datasets import mnist
(x, y), (xt, yt) = mnist.load_data()
assert x.shape[1:] == (28, 28) and x.dtype.name == "uint8" and y.dtype.name == "uint8", (x.shape, x.dtype)
datasets, info = tfds.load(name="mnist", with_info=True, as_supervised=True)
image, label = next(iter(datasets["train"]))
assert image.shape == (28, 28, 1) and image.dtype == tf.uint8 and label.dtype == tf.int64
print("offline MNIST ok with", tf.keras.__name__, len(x), "training images")
"""


def log(message: str) -> None:
    print(f"[tfjob-images {time.strftime('%H:%M:%S')}] {message}", flush=True)


def buildah(*args: str, capture: bool = True) -> str:
    """buildah with the image store every hack/ script uses (hack/lib.sh)."""
    script = 'source "$1/hack/lib.sh"; shift; buildah "$@"'
    done = subprocess.run(
        ["bash", "-c", script, "tfjob-images", str(REPO), *args],
        check=False,
        capture_output=capture,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"buildah {' '.join(args)}: {done.stderr}")
    return done.stdout.strip() if capture else ""


def has_image(name: str) -> bool:
    try:
        buildah("inspect", "--type", "image", name)
    except RuntimeError:
        return False
    return True


def image_id(name: str) -> str:
    return buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", name)


def inputs_hash(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def offline_files() -> list[Path]:
    return sorted(p for p in OFFLINE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def shared_layer(version: str) -> str:
    """tfmw-trainer:dev plus the offline data: tfjob-examples-base:<hash of its inputs>."""
    if not has_image(BASE):
        raise RuntimeError(f"{BASE} is missing: run hack/images.sh first")
    files = offline_files()
    inputs = inputs_hash(
        image_id(BASE), version, Path(__file__).read_bytes(), *(p.read_bytes() for p in files)
    )
    name = f"tfjob-examples-base:{inputs}"
    if has_image(name):
        return name
    log(f"building {name} (the offline data over {BASE}) ...")
    container = buildah("from", "--pull=never", BASE)
    try:
        run = ("run", "--isolation", "chroot", "--user", "0:0", container, "--")
        site = buildah(*run, "python3", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
        for module in ("tfjob_offline_data.py", "tfjob_offline_data.pth"):
            buildah("copy", "--chmod", "0644", container, str(OFFLINE / module), f"{site}/{module}")
        buildah("copy", container, str(OFFLINE / "tensorflow_datasets"), f"{site}/tensorflow_datasets")
        buildah("copy", "--chmod", "0644", container, str(OFFLINE / "make_mnist.py"), "/opt/tfjob-offline/")
        log(buildah(*run, "python3", "/opt/tfjob-offline/make_mnist.py", "/opt/tfjob-offline/mnist.npz"))
        buildah(*run, "mkdir", "-p", *WRITABLE)
        buildah(*run, "chmod", "1777", *WRITABLE)
        for legacy in ("0", "1"):  # Keras 3, then tf-keras: the replacement works under both
            check = (
                "run",
                "--isolation",
                "chroot",
                "--env",
                f"TF_USE_LEGACY_KERAS={legacy}",
                container,
                "--",
            )
            log(buildah(*check, "python3", "-c", OFFLINE_CHECK))
        buildah("commit", "-q", "--rm", container, name)
    except BaseException:
        buildah("rm", container)
        raise
    return name


def build(made: Recipe, module: Path, base: str) -> str:
    """The recipe's image over the shared layer; tagged with every name it has."""
    tag = f"tfjob-example-{made.component}:{base.split(':')[1]}"
    if not has_image(tag):
        log(f"building {made.component} from {made.dockerfile} (replaced: {'; '.join(made.replaced)}) ...")
        container = buildah("from", "--pull=never", base)
        try:
            for keyword, arguments in made.steps:
                *sources, destination = arguments
                paths = [str(module / made.context / source) for source in sources]
                buildah("add" if keyword == "ADD" else "copy", container, *paths, destination)
            env = dict(made.env)
            if made.legacy_keras is not None:
                env = {"TF_USE_LEGACY_KERAS": "1" if made.legacy_keras else "0", **env}
            options = [f"--env={key}={value}" for key, value in env.items()]
            options.append(f"--workingdir={made.workdir or '/'}")
            options.append(f"--entrypoint={json_list(made.entrypoint or [])}")
            options.append(f"--cmd={json_list(made.cmd or [])}")
            options.append(f"--label=tfmw.dev/tfjob-example-dockerfile={made.dockerfile}")
            buildah("config", *options, container)
            buildah("commit", "-q", "--rm", container, tag)
        except BaseException:
            buildah("rm", container)
            raise
    for name in made.names:
        buildah("tag", tag, name)
    return tag


def json_list(items: list[str]) -> str:
    return json.dumps(items)


def ctr(*args: str) -> str:
    socket = CLUSTER_DIR / "containerd" / "containerd.sock"
    done = subprocess.run(
        ["ctr", "--address", str(socket), "-n", "k8s.io", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ctr {' '.join(args)}: {done.stderr}")
    return done.stdout


def load(built: list[tuple[str, list[str]]]) -> None:
    """The built images into the local node's containerd, each under every name it has,
    unless these very builds are there already.

    Only what containerd lacks is sent. The images are written to one OCI layout with
    uncompressed layers (so their digests are those of the trainer image's layers that
    hack/images.sh imported, and the later images find the shared ones written), and each is
    imported from an archive of its manifest, its configuration and the blobs containerd does
    not have. A docker-archive per image (hack/lib.sh's load_image) would carry the 2.5 GB of
    TensorFlow each time.
    """
    ids = {tag: image_id(tag) for tag, _ in built}
    stamp = STAMPS / "imported.json"
    present = set(ctr("images", "ls", "-q").split())
    if (
        stamp.exists()
        and json.loads(stamp.read_text()) == ids
        and all(name in present for _, names in built for name in names)
    ):
        return
    STAMPS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=STAMPS) as scratch:
        layout = Path(scratch) / "layout"
        for tag, names in built:
            buildah("push", "-q", "--disable-compression", tag, f"oci:{layout}:{names[0]}")
        index = json.loads((layout / "index.json").read_text())
        have = set(ctr("content", "ls", "-q").split())
        for _, names in built:
            (entry,) = [
                m
                for m in index["manifests"]
                if m["annotations"]["org.opencontainers.image.ref.name"] == names[0]
            ]
            manifest = json.loads(blob(layout, entry["digest"]).read_text())
            wanted = [
                entry["digest"],
                manifest["config"]["digest"],
                *(layer["digest"] for layer in manifest["layers"]),
            ]
            sent = [digest for digest in wanted if digest not in have]
            archive = Path(scratch) / "image.tar"
            try:
                _import(layout, entry, sent, archive, names[0])
            except RuntimeError as error:
                # A blob containerd listed can be collected before the import refers to it
                # (an image just replaced left it unreferenced): send every blob then.
                if "not found" not in str(error):
                    raise
                log(f"{names[0]}: {error}; importing it again with every blob")
                sent = wanted
                _import(layout, entry, sent, archive, names[0])
            for name in names[1:]:
                ctr("images", "tag", "--force", names[0], name)
            size = sum(blob(layout, digest).stat().st_size for digest in sent)
            log(f"imported {', '.join(names)} into containerd ({size / 1e6:.1f} MB new)")
    stamp.write_text(json.dumps(ids))
    log(f"loaded in {time.monotonic() - started:.0f}s")


def _import(layout: Path, entry: dict[str, Any], sent: list[str], archive: Path, name: str) -> None:
    """One image into containerd from an archive of its manifest and the blobs `sent`."""
    with tarfile.open(archive, "w") as tar:
        tar.add(layout / "oci-layout", arcname="oci-layout")
        single = json.dumps({"schemaVersion": 2, "manifests": [entry]}).encode()
        info = tarfile.TarInfo("index.json")
        info.size = len(single)
        tar.addfile(info, io.BytesIO(single))
        for digest in sent:
            tar.add(blob(layout, digest), arcname=f"blobs/sha256/{digest.split(':')[1]}")
    try:
        ctr("images", "import", "--no-unpack=false", "--index-name", name, str(archive))
    finally:
        archive.unlink()


def blob(layout: Path, digest: str) -> Path:
    return layout / "blobs" / "sha256" / digest.split(":")[1]


def prune(keep: set[str]) -> None:
    """Earlier builds of these images only take disk space."""
    for line in buildah("images", "--format", "{{.Name}}:{{.Tag}}").splitlines():
        name = line.split("/", 1)[-1]  # buildah's localhost/ prefix
        if name.split(":")[0].startswith("tfjob-example") and name not in keep:
            buildah("rmi", line)


def main() -> None:
    started = time.monotonic()
    version = pinned_version()
    module = module_dir(version)
    if not (CLUSTER_DIR / "containerd" / "containerd.sock").is_socket():
        sys.exit("tfjob-images: the local node's containerd is not running (hack/cluster.sh up)")
    base = shared_layer(version)
    built = [(build(made, module, base), made.names) for made in recipes(module)]
    load(built)
    prune({base, *(tag for tag, _ in built)})
    log(f"images ready in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()

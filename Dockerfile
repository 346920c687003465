# Two images from one file:  --target operator  and  --target trainer.
# BASE is any Debian-like image with Python 3.11, venv and pip (python:3.11-slim works);
# hack/images.sh builds one locally with debootstrap, for machines without a registry.
ARG BASE=python:3.11-slim
# What each image says about itself (the OCI labels, and TFMW_VERSION/TFMW_REVISION for
# `--version` and the tfmw_build_info metric) comes from the build arguments VERSION,
# REVISION, SOURCE and LICENSES, declared in the last two stages only (so they never touch
# the dependency layers' cache): pyproject.toml's version, license and home page and the
# git revision. hack/images.sh sets the same on its buildah builds with `buildah config`.

# Each image is one stage: its dependencies, from pyproject.toml alone, in a layer of their
# own (so a code change rebuilds and re-imports kilobytes, not TensorFlow), then the code.
# One stage writes TensorFlow once: a dependencies stage copied into the image wrote it
# twice more (the stage's commit, the copy). hack/pip_requirements.py lists what pip
# installs; tf-keras comes without its dependencies, or pip would put a second TensorFlow
# (the 572 MB `tensorflow`) over tensorflow-cpu (that script says why).
# PIP_CERT: a CA bundle for pip to trust (hack/images.sh mounts the host's); empty: pip's own.
FROM ${BASE} AS operator
RUN useradd --uid 1000 --user-group --home-dir /tmp --no-create-home tfmw
ARG PIP_CERT
COPY pyproject.toml hack/pip_requirements.py /tmp/tfmw-build/
RUN cd /tmp/tfmw-build && python3 -m venv /opt/tfmw \
    && python3 pip_requirements.py pyproject.toml operator >requirements.txt \
    && /opt/tfmw/bin/pip install --no-cache-dir --disable-pip-version-check -q -r requirements.txt \
    && cd / && rm -rf /tmp/tfmw-build
COPY operator/tfmw_operator /opt/tfmw-src/tfmw_operator
# Compiled once here: PYTHONDONTWRITEBYTECODE would have every start compile it again.
RUN /opt/tfmw/bin/python3 -m compileall -q --invalidation-mode unchecked-hash /opt/tfmw-src
# Few malloc arenas: the operator's API threads otherwise fragment memory into a larger RSS.
# A fixed mmap threshold: glibc's sliding one (raised by each large buffer freed) puts the
# next watch pages and request bodies on the heap among long-lived objects, where they stay
# (docs/benchmarks.md, "Memory": 6 MB of 76 at 300 jobs, none of it live objects). Above the
# 256 KiB buffer every TLS read allocates: at 128 KiB each was an mmap, its pages faulted in
# and unmapped again, most of the launch's CPU above run G's ("The TLS reads"). A fixed
# threshold also fixes the trim threshold at 128 KiB: the buffer, shrunk to what was read
# and freed at the heap's top, was trimmed and faulted in again at every read (one fault a
# read against none at 1 MiB: docs/benchmarks.md, "The TLS reads, again").
ENV PATH=/opt/tfmw/bin:$PATH PYTHONPATH=/opt/tfmw-src PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=524288 MALLOC_TRIM_THRESHOLD_=1048576
ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE=""
ARG LICENSES=Apache-2.0
LABEL org.opencontainers.image.title=tfmw-operator org.opencontainers.image.version=$VERSION \
    org.opencontainers.image.revision=$REVISION org.opencontainers.image.source=$SOURCE \
    org.opencontainers.image.licenses=$LICENSES
ENV TFMW_VERSION=$VERSION TFMW_REVISION=$REVISION
USER 1000:1000
ENTRYPOINT ["python3", "-m", "tfmw_operator"]
CMD ["--shared-root=/var/lib/tfmw/shared"]

FROM ${BASE} AS trainer
RUN useradd --uid 1000 --user-group --home-dir /tmp --no-create-home tfmw
ARG PIP_CERT
COPY pyproject.toml hack/pip_requirements.py /tmp/tfmw-build/
# What a training process never reads goes in the same layer, so it never reaches the image:
# TensorFlow's C++ headers (287 MB, for building custom ops), the packages' own test suites
# (69 MB; only their test runners import them) and libclang (62 MB: a requirement of
# tensorflow's that none of its Python imports).
RUN cd /tmp/tfmw-build && python3 -m venv /opt/tfmw \
    && python3 pip_requirements.py pyproject.toml trainer >requirements.txt \
    && python3 pip_requirements.py --no-deps pyproject.toml trainer >requirements-no-deps.txt \
    && /opt/tfmw/bin/pip install --no-cache-dir --disable-pip-version-check -q -r requirements.txt \
    && /opt/tfmw/bin/pip install --no-cache-dir --disable-pip-version-check -q --no-deps -r requirements-no-deps.txt \
    && /opt/tfmw/bin/pip uninstall -q -y libclang \
    && cd / && rm -rf /tmp/tfmw-build \
    && site=$(/opt/tfmw/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
    && rm -rf "$site/tensorflow/include" \
    && find "$site" -mindepth 2 -type d -name tests -prune -exec rm -rf {} +
COPY trainer/tfmw_trainer /opt/tfmw-src/tfmw_trainer
# The wire contract with the operator (standard library only), not the operator itself.
COPY operator/tfmw_operator/__init__.py operator/tfmw_operator/contract.py /opt/tfmw-src/tfmw_operator/
# Keras 3 refuses model.fit under MultiWorkerMirroredStrategy; tf-keras does not.
ENV PATH=/opt/tfmw/bin:$PATH PYTHONPATH=/opt/tfmw-src PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2 HOME=/tmp
ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE=""
ARG LICENSES=Apache-2.0
LABEL org.opencontainers.image.title=tfmw-trainer org.opencontainers.image.version=$VERSION \
    org.opencontainers.image.revision=$REVISION org.opencontainers.image.source=$SOURCE \
    org.opencontainers.image.licenses=$LICENSES
ENV TFMW_VERSION=$VERSION TFMW_REVISION=$REVISION
USER 1000:1000
ENTRYPOINT ["env", "--block-signal=TERM,USR1", "python3", "-m", "tfmw_trainer"]

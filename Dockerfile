# Two images from one file:  --target operator  and  --target trainer.
# BASE is any Debian-like image with Python 3.11, venv and pip (python:3.11-slim works);
# hack/images.sh builds one locally with debootstrap, for machines without a registry.
ARG BASE=python:3.11-slim
# What each image says about itself (the OCI labels, and TFMW_VERSION/TFMW_REVISION for
# `--version` and the tfmw_build_info metric) comes from the build arguments VERSION,
# REVISION, SOURCE and LICENSES, declared in the last two stages only (so they never touch
# the dependency layers' cache): pyproject.toml's version, license and home page and the
# git revision. hack/images.sh sets the same on its buildah builds with `buildah config`.

# Dependencies come from pyproject.toml alone and the code is a layer of its own, so a
# code change rebuilds and re-imports kilobytes, not TensorFlow.
FROM ${BASE} AS operator-deps
# A folder of wheels to prefer over the index (hack/images.sh mounts one); empty: the index only.
ARG PIP_FIND_LINKS
COPY pyproject.toml /src/
RUN mkdir -p /src/operator/tfmw_operator /src/trainer && python3 -m venv /opt/tfmw \
    && /opt/tfmw/bin/pip install --no-cache-dir "/src[operator]" && /opt/tfmw/bin/pip uninstall -y -q tfmw

FROM ${BASE} AS trainer-deps
ARG PIP_FIND_LINKS
COPY pyproject.toml /src/
RUN mkdir -p /src/trainer/tfmw_trainer /src/operator && python3 -m venv /opt/tfmw \
    && /opt/tfmw/bin/pip install --no-cache-dir "/src[trainer]" && /opt/tfmw/bin/pip uninstall -y -q tfmw

FROM ${BASE} AS operator
RUN useradd --uid 1000 --user-group --home-dir /tmp --no-create-home tfmw
COPY --from=operator-deps /opt/tfmw /opt/tfmw
COPY operator/tfmw_operator /opt/tfmw-src/tfmw_operator
# Compiled once here: PYTHONDONTWRITEBYTECODE would have every start compile it again.
RUN /opt/tfmw/bin/python3 -m compileall -q --invalidation-mode unchecked-hash /opt/tfmw-src
# Few malloc arenas: the operator's API threads otherwise fragment memory into a larger RSS.
ENV PATH=/opt/tfmw/bin:$PATH PYTHONPATH=/opt/tfmw-src PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    MALLOC_ARENA_MAX=2
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
COPY --from=trainer-deps /opt/tfmw /opt/tfmw
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

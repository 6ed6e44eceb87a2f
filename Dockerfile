# envelope-ci container action image. The runner rebuilds it on every run
# (docker build -f Dockerfile <action dir>), so keep it small and simple.
FROM python:3.12.12-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# git reads the base branch's pins (git show HEAD^1:...). Versions are not pinned
# (DL3008): Debian's archive keeps only the current security build of a package
# in bookworm, so an exact pin would break the build at the next git update;
# the base image tag above is what is pinned.
#
# safe.directory: the action runs as root (a container action must not set
# USER), while the mounted /github/workspace belongs to the runner's user, so
# git >= 2.35.2 refuses it as "dubious ownership". actions/checkout's
# set-safe-directory writes the host's global config, which the container does
# not see, and the setting is honoured only in system/global/command-line
# config, so it goes into the image's system config.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*'

COPY . /app
RUN pip install --no-cache-dir /app

ENTRYPOINT ["python", "/app/entrypoint.py"]

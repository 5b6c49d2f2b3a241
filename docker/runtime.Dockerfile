# The Python runtime of fabriclab's worker images: Debian's python3 and a venv with the
# workers' dependencies, from wheels `fabriclab images` downloaded on the host (no registry
# here), each checked against the hash scripts/requirements.lock (or torch-requirements.lock)
# gives for it.
ARG BASE
FROM ${BASE}
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3 python3-venv iproute2 iperf3 \
 && rm -rf /var/lib/apt/lists/*
COPY wheels /tmp/wheels
RUN python3 -m venv /opt/fabriclab \
 && /opt/fabriclab/bin/pip install -q --no-index --find-links /tmp/wheels \
      --require-hashes -r /tmp/wheels/requirements.txt \
 && rm -rf /tmp/wheels /root/.cache
ENV PATH=/opt/fabriclab/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

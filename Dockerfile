# Builds metricsd and metricsctl on Debian 12 with the project's own setup
# script, then copies them and the profiler page (web/ with uPlot from npm)
# into a slim runtime image.
FROM debian:12 AS build
WORKDIR /src
COPY . .
RUN ./setup.sh \
 && cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
 && ninja -C /build metricsd metricsctl

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libpqxx-6.4 \
      libabsl20220623 libssl3 ca-certificates openssl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/server/metricsd /build/ctl/metricsctl /usr/local/bin/
COPY --from=build /src/web/index.html /usr/local/share/metricsd/web/
COPY --from=build /src/web/src /usr/local/share/metricsd/web/src
COPY --from=build /src/web/node_modules/uplot/dist /usr/local/share/metricsd/web/node_modules/uplot/dist
USER nobody
EXPOSE 8080 8081
ENTRYPOINT ["metricsd"]
# Tokens are required and ports beyond loopback need TLS: mount the
# certificate at /secrets (docker-compose.yml's "secrets" service makes one).
CMD ["--grpc-address=0.0.0.0:8081", "--http-address=0.0.0.0:8080", \
     "--tls-cert=/secrets/server.pem", "--tls-key=/secrets/server.key", \
     "--web-root=/usr/local/share/metricsd/web"]

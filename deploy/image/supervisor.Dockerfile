# paddock:dev — the supervisor image deploy/compose runs: paddock, its
# runtime plugins, agentctl and the demo agent, static, FROM scratch (nothing
# is pulled). Built by deploy/image/build-supervisor.sh (`make image`).
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/bin HOME=/var/lib/paddock TMPDIR=/tmp
WORKDIR /var/lib/paddock
VOLUME /var/lib/paddock
ENTRYPOINT ["/usr/local/bin/paddock"]
CMD ["server", "-config", "/etc/paddock/paddock.hcl"]

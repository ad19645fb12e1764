import { ConfigError, loadConfig } from './config';
import { parseEventStoreUrl } from './eventstore-url';

describe('EVENTSTORE_URL', () => {
  const ca = __filename; // any file that exists: only its presence is checked here

  it('accepts one node, a list of gossip seeds, a discovery name, and the kurrent spellings', () => {
    for (const good of [
      'esdb://127.0.0.1:2113?tls=false',
      'esdb://admin:s3cret@eventstore:2113/?tls=true',
      `esdb://admin:pw@node1:2113,node2:2113,node3:2113?tls=true&tlsCAFile=${ca}&nodePreference=leader`,
      `esdb+discover://admin:pw@node1:2113,node2:2113,node3:2113?tls=true&tlsCAFile=${ca}&nodePreference=leader`,
      'esdb+discover://cluster.internal:2113?nodePreference=Follower&maxDiscoverAttempts=5',
      'kurrentdb://node1,node2,node3?node-preference=read_only_replica&keepAliveInterval=-1',
      'kurrent+discover://cluster.internal',
    ]) {
      expect(loadConfig({ EVENTSTORE_URL: good }).eventstoreUrl).toBe(good);
    }
  });

  it('refuses a malformed node list or option, saying which part is wrong and never repeating the password', () => {
    const cases: Array<[string, RegExp]> = [
      ['esdb://node1:2113,node2:99999,node3:2113', /node 2 \(node2\): expected a port from 1 to 65535, got "99999"/],
      ['esdb://node1:2113,node2:2113x', /node 2 \(node2\): expected a port from 1 to 65535, got "2113x"/],
      ['esdb://node1:2113,,node3:2113', /node 2: expected host\[:port\], got ""/],
      ['esdb://node1:2113,node1:2113', /node node1:2113 is listed twice/],
      ['esdb://admin:hunter2@n1,n2?nodePreference=leaderr', /option nodePreference: expected leader, follower, read_only_replica or random, got "leaderr"/],
      ['esdb://admin:hunter2@n1,n2?nodePrefrence=leader', /unknown option "nodePrefrence"/],
      ['esdb://n1?tls=yes', /option tls: expected true or false, got "yes"/],
      ['esdb://n1?gossipTimeout=0', /option gossipTimeout: expected a positive integer/],
      ['esdb://n1?tls=true&tls=false', /option tls is given twice/],
      ['esdb://n1?tlsVerifyCert=false', /tlsVerifyCert=false is not supported/],
      ['esdb://n1?tls=true&tlsCAFile=/nonexistent/ca.crt', /tlsCAFile: no such file: \/nonexistent\/ca.crt/],
      ['esdb://n1?userCertFile=/a.crt', /userCertFile and userKeyFile go together/],
      ['esdb://admin:hun:ter2@n1', /expected user:password@ before the node\(s\)/],
      ['esdb://?tls=false', /expected at least one node/],
      ['http://admin:hunter2@n1:2113', /^EVENTSTORE_URL: expected esdb:\/\/ or esdb\+discover:\/\//],
    ];
    for (const [bad, message] of cases) {
      expect(() => loadConfig({ EVENTSTORE_URL: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ EVENTSTORE_URL: bad })).toThrow(message);
      expect(() => loadConfig({ EVENTSTORE_URL: bad })).toThrow(/^EVENTSTORE_URL: (?!.*hunter2)/);
    }
  });
});

describe('parseEventStoreUrl', () => {
  it('hands the client every node of a discovery list as a seed: this client gossips with only the first of an esdb+discover list', () => {
    expect(parseEventStoreUrl('esdb+discover://admin:p%40ss@node1:2113,node2,node3:2114?tls=false&nodePreference=leader')).toEqual({
      cluster: true,
      hosts: [
        { host: 'node1', port: 2113 },
        { host: 'node2', port: 2113 },
        { host: 'node3', port: 2114 },
      ],
      nodePreference: 'leader',
      tls: false,
      clientConnectionString: 'esdb://admin:p%40ss@node1:2113,node2:2113,node3:2114?tls=false&nodePreference=leader',
    });
  });

  it('keeps a single discovery name, rewrites the kurrent schemes, and defaults to the leader over TLS', () => {
    expect(parseEventStoreUrl('kurrentdb+discover://cluster.internal?NodePreference=follower')).toMatchObject({
      cluster: true,
      nodePreference: 'follower',
      tls: true,
      clientConnectionString: 'esdb+discover://cluster.internal:2113?nodePreference=follower',
    });
    expect(parseEventStoreUrl('kurrent://eventstore/')).toMatchObject({
      cluster: false,
      nodePreference: 'leader',
      clientConnectionString: 'esdb://eventstore:2113',
    });
  });
});

describe('SVC_METRICS_PORT', () => {
  it('is null unless set, and a port when set', () => {
    expect(loadConfig({}).metricsPort).toBeNull();
    expect(loadConfig({ SVC_METRICS_PORT: '9464' }).metricsPort).toBe(9464);
    expect(loadConfig({ SVC_METRICS_PORT: '0', PORT: '0' }).metricsPort).toBe(0);
  });

  it('refuses a value that is not a port, or the main port, naming the variable', () => {
    for (const bad of ['-1', '65536', 'nine', '1.5']) expect(() => loadConfig({ SVC_METRICS_PORT: bad })).toThrow(/^SVC_METRICS_PORT: /);
    expect(() => loadConfig({ SVC_METRICS_PORT: '8080' })).toThrow(/^SVC_METRICS_PORT: must differ from PORT/);
  });
});

describe('SVC_AUTH_CACHE', () => {
  it('is on unless set to off', () => {
    expect(loadConfig({}).authCache).toBe(true);
    expect(loadConfig({ SVC_AUTH_CACHE: 'on' }).authCache).toBe(true);
    expect(loadConfig({ SVC_AUTH_CACHE: ' off ' }).authCache).toBe(false);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => loadConfig({ SVC_AUTH_CACHE: 'false' })).toThrow(ConfigError);
    expect(() => loadConfig({ SVC_AUTH_CACHE: 'false' })).toThrow(/^SVC_AUTH_CACHE: expected on or off, got "false"$/);
  });
});

describe('SVC_PEER_FORWARDING and SVC_PEER_URL (issue 45)', () => {
  it('is off unless on; on, hands over holds and charges, and the peer URL is SVC_PEER_URL or, unset, the listening address', () => {
    expect(loadConfig({}).peerForwarding).toBeNull();
    expect(loadConfig({ SVC_PEER_FORWARDING: 'on', HOST: '127.0.0.1' }).peerForwarding).toEqual({ url: null, handOver: 'ledger' });
    expect(loadConfig({ SVC_PEER_FORWARDING: 'requests', HOST: '127.0.0.1' }).peerForwarding).toEqual({ url: null, handOver: 'requests' });
    expect(loadConfig({ SVC_PEER_FORWARDING: 'ledger', HOST: '127.0.0.1' }).peerForwarding).toEqual({ url: null, handOver: 'ledger' });
    expect(loadConfig({ SVC_PEER_FORWARDING: 'off', HOST: '127.0.0.1' }).peerForwarding).toBeNull();
    expect(loadConfig({ SVC_PEER_FORWARDING: 'requests', HOST: '0.0.0.0', SVC_PEER_URL: 'http://10.0.0.5:8080' }).peerForwarding).toEqual({
      url: 'http://10.0.0.5:8080',
      handOver: 'requests',
    });
  });

  it('refuses a wildcard HOST without a peer URL, and a peer URL without forwarding, naming the variable', () => {
    expect(() => loadConfig({ SVC_PEER_FORWARDING: 'on', HOST: '0.0.0.0' })).toThrow(/^SVC_PEER_URL: needed with SVC_PEER_FORWARDING=on and HOST=0.0.0.0/);
    expect(() => loadConfig({ SVC_PEER_URL: 'http://10.0.0.5:8080' })).toThrow(/^SVC_PEER_URL: set, but SVC_PEER_FORWARDING is not on/);
    expect(() => loadConfig({ SVC_PEER_FORWARDING: 'on', HOST: '127.0.0.1', SVC_PEER_URL: 'ftp://x' })).toThrow(/^SVC_PEER_URL: /);
    expect(() => loadConfig({ SVC_PEER_FORWARDING: 'yes' })).toThrow(/^SVC_PEER_FORWARDING: /);
  });
});

describe('SVC_AUTH_FAILURE_LIMIT', () => {
  it('is 100 failed authentications per minute and client address unless set to a positive integer', () => {
    expect(loadConfig({}).authFailureLimit).toBe(100);
    expect(loadConfig({ SVC_AUTH_FAILURE_LIMIT: '5' }).authFailureLimit).toBe(5);
    for (const bad of ['0', '-1', 'many', '1.5']) expect(() => loadConfig({ SVC_AUTH_FAILURE_LIMIT: bad })).toThrow(/^SVC_AUTH_FAILURE_LIMIT: /);
  });
});

describe('SVC_REQUEST_LOG', () => {
  it('is on unless set to off', () => {
    expect(loadConfig({}).requestLog).toBe(true);
    expect(loadConfig({ SVC_REQUEST_LOG: 'off' }).requestLog).toBe(false);
    expect(() => loadConfig({ SVC_REQUEST_LOG: 'quiet' })).toThrow(/^SVC_REQUEST_LOG: /);
  });
});

describe('LOG_LEVEL and SVC_LOG_FORMAT', () => {
  it('log at info, in the format the terminal decides, unless set', () => {
    expect(loadConfig({})).toMatchObject({ logLevel: 'info', logFormat: null });
    expect(loadConfig({ LOG_LEVEL: 'debug', SVC_LOG_FORMAT: 'pretty' })).toMatchObject({ logLevel: 'debug', logFormat: 'pretty' });
    expect(loadConfig({ LOG_LEVEL: 'silent', SVC_LOG_FORMAT: 'json' })).toMatchObject({ logLevel: 'silent', logFormat: 'json' });
  });

  it('refuse a level or format pino does not know, naming the variable', () => {
    expect(() => loadConfig({ LOG_LEVEL: 'verbose' })).toThrow(/^LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent/);
    expect(() => loadConfig({ SVC_LOG_FORMAT: 'text' })).toThrow(/^SVC_LOG_FORMAT: /);
  });
});

describe('SVC_WEBHOOK_ALLOW_PRIVATE', () => {
  it('is off unless set to true or on', () => {
    expect(loadConfig({}).webhookAllowPrivate).toBe(false);
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: 'true' }).webhookAllowPrivate).toBe(true);
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: ' on ' }).webhookAllowPrivate).toBe(true);
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: 'false' }).webhookAllowPrivate).toBe(false);
    expect(loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: 'off' }).webhookAllowPrivate).toBe(false);
  });

  it('refuses anything else, naming the variable', () => {
    for (const bad of ['yes', '1', 'TRUE']) {
      expect(() => loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ SVC_WEBHOOK_ALLOW_PRIVATE: bad })).toThrow(/^SVC_WEBHOOK_ALLOW_PRIVATE: expected true or false/);
    }
  });
});

describe('SVC_SMTP_URL', () => {
  it('is unset (mail goes to the development mailbox) unless set to an smtp: or smtps: URL', () => {
    expect(loadConfig({}).smtpUrl).toBeNull();
    expect(loadConfig({ SVC_SMTP_URL: '  ' }).smtpUrl).toBeNull();
    expect(loadConfig({ SVC_SMTP_URL: 'smtp://127.0.0.1:2525' }).smtpUrl).toBe('smtp://127.0.0.1:2525');
    expect(loadConfig({ SVC_SMTP_URL: ' smtps://relay.example.com ' }).smtpUrl).toBe('smtps://relay.example.com');
    expect(loadConfig({ SVC_SMTP_URL: 'smtp://apikey:s%40cret@relay.example.com:587' }).smtpUrl).toBe('smtp://apikey:s%40cret@relay.example.com:587');
  });

  it('refuses other schemes, non-URLs and URLs without a host, naming the variable', () => {
    for (const bad of ['http://relay.example.com', 'relay.example.com:25', 'smtp:relay', 'smtp://relay:99999', 'mailto:ops@example.com']) {
      expect(() => loadConfig({ SVC_SMTP_URL: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ SVC_SMTP_URL: bad })).toThrow(/^SVC_SMTP_URL: /);
    }
  });

  it('never repeats the URL, which may hold the password, in its error', () => {
    expect(() => loadConfig({ SVC_SMTP_URL: 'smtp:user:hunter2' })).toThrow(/^SVC_SMTP_URL: (?!.*hunter2)/);
    expect(() => loadConfig({ SVC_SMTP_URL: 'https://user:hunter2@relay' })).toThrow(/^SVC_SMTP_URL: (?!.*hunter2)/);
  });
});

describe('SVC_MAIL_FROM', () => {
  it('is "svc-gateway <no-reply@localhost>" unless set to an address or a name and <address>', () => {
    expect(loadConfig({}).mailFrom).toBe('svc-gateway <no-reply@localhost>');
    expect(loadConfig({ SVC_MAIL_FROM: ' no-reply@example.com ' }).mailFrom).toBe('no-reply@example.com');
    expect(loadConfig({ SVC_MAIL_FROM: '"Acme, Inc." <billing@acme.example>' }).mailFrom).toBe('"Acme, Inc." <billing@acme.example>');
  });

  it('refuses what is not one mailbox, naming the variable', () => {
    for (const bad of ['no-reply', 'Acme <no-reply>', 'a@b.example, c@d.example', 'Acme\r\nBcc: x@y.example <a@b.example>']) {
      expect(() => loadConfig({ SVC_MAIL_FROM: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ SVC_MAIL_FROM: bad })).toThrow(/^SVC_MAIL_FROM: expected an address/);
    }
  });
});

describe('SVC_READY_MAX_LAG_SECONDS', () => {
  it('is 30 seconds unless set to a positive integer of at most a day', () => {
    expect(loadConfig({}).readyMaxLagSeconds).toBe(30);
    expect(loadConfig({ SVC_READY_MAX_LAG_SECONDS: '120' }).readyMaxLagSeconds).toBe(120);
    for (const bad of ['0', '-5', 'soon', '2.5', '86401']) expect(() => loadConfig({ SVC_READY_MAX_LAG_SECONDS: bad })).toThrow(/^SVC_READY_MAX_LAG_SECONDS: /);
  });
});

describe('OTEL_EXPORTER_OTLP_ENDPOINT (issue 22: traces)', () => {
  it('is no tracing unless an endpoint is set; the traces path is added to the base endpoint, not to the traces one', () => {
    expect(loadConfig({}).tracing).toBeNull();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing).toEqual({
      url: 'http://collector:4318/v1/traces',
      serviceName: 'svc-gateway',
    });
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example/base/', OTEL_SERVICE_NAME: 'edge-eu' }).tracing).toEqual({
      url: 'https://otlp.example/base/v1/traces',
      serviceName: 'edge-eu',
    });
    expect(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/custom' }).tracing?.url).toBe('http://collector:4318/custom');
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).tracing).toBeNull();
  });

  it('refuses an endpoint that is not an http(s) URL, naming the variable', () => {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' })).toThrow(/^OTEL_EXPORTER_OTLP_ENDPOINT: /);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://collector:4317' })).toThrow(/^OTEL_EXPORTER_OTLP_ENDPOINT: /);
  });
});

describe('DATABASE_READ_URL', () => {
  it('is unset (every read on DATABASE_URL) unless set to a postgres: or postgresql: URL beside DATABASE_URL', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://db:5432/svc' }).databaseReadUrl).toBeNull();
    expect(loadConfig({ DATABASE_URL: 'postgres://db:5432/svc', DATABASE_READ_URL: 'postgresql://standby:5432/svc' }).databaseReadUrl).toBe(
      'postgresql://standby:5432/svc',
    );
  });

  it('refuses another scheme, and a standby without the primary it replays, naming the variable', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://db/svc', DATABASE_READ_URL: 'mysql://standby/svc' })).toThrow(/^DATABASE_READ_URL: /);
    expect(() => loadConfig({ DATABASE_READ_URL: 'postgres://standby/svc' })).toThrow(/^DATABASE_READ_URL: needs DATABASE_URL/);
  });
});

describe('DATABASE_SESSION_URL and DATABASE_POOL_MAX', () => {
  const url = 'postgres://svc@pgbouncer:6432/svc';
  const direct = 'postgres://svc@db:5432/svc';

  it('sessions go to DATABASE_URL unless another PostgreSQL URL is set; the pool holds 10 connections unless set', () => {
    expect(loadConfig({ DATABASE_URL: url })).toMatchObject({ databaseUrl: url, databaseSessionUrl: null, databasePoolMax: 10 });
    expect(loadConfig({ DATABASE_URL: url, DATABASE_SESSION_URL: direct, DATABASE_POOL_MAX: '40' })).toMatchObject({
      databaseSessionUrl: direct,
      databasePoolMax: 40,
    });
    // The same URL twice is no pooler in between: statements keep their names.
    expect(loadConfig({ DATABASE_URL: url, DATABASE_SESSION_URL: url }).databaseSessionUrl).toBeNull();
  });

  it('refuses what DATABASE_URL refuses, a session URL without DATABASE_URL, and a pool of no connection, naming the variable', () => {
    expect(() => loadConfig({ DATABASE_URL: url, DATABASE_SESSION_URL: 'mysql://db/svc' })).toThrow(
      /^DATABASE_SESSION_URL: expected a postgres: or postgresql: URL/,
    );
    expect(() => loadConfig({ DATABASE_URL: url, DATABASE_SESSION_URL: 'db:5432' })).toThrow(/^DATABASE_SESSION_URL: /);
    expect(() => loadConfig({ DATABASE_SESSION_URL: direct })).toThrow(/^DATABASE_SESSION_URL: set, but DATABASE_URL is not/);
    for (const bad of ['0', '-1', 'ten', '1001']) expect(() => loadConfig({ DATABASE_URL: url, DATABASE_POOL_MAX: bad })).toThrow(/^DATABASE_POOL_MAX: /);
  });
});

describe('REDIS_CLUSTER_NODES', () => {
  it('is null unless set, and the nodes when set', () => {
    expect(loadConfig({})).toMatchObject({ redisUrl: null, redisClusterNodes: null });
    expect(loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:57001, redis-b.internal:7000,[::1]:7001' }).redisClusterNodes).toEqual([
      { host: '127.0.0.1', port: 57001 },
      { host: 'redis-b.internal', port: 7000 },
      { host: '::1', port: 7001 },
    ]);
  });

  it('refuses a node that is not host:port, naming the variable and the node', () => {
    for (const bad of ['127.0.0.1', '127.0.0.1:0', 'a:65536', 'a:7000,', ':7000', 'redis://a:7000', 'a:b', 'a b:7000', '::1:7000']) {
      expect(() => loadConfig({ REDIS_CLUSTER_NODES: bad })).toThrow(/^REDIS_CLUSTER_NODES: expected host:port pairs separated by commas/);
    }
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'a:7000,b' })).toThrow(/got "b"$/);
  });

  it('refuses it beside REDIS_URL: one Redis or one cluster', () => {
    expect(() => loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379', REDIS_CLUSTER_NODES: '127.0.0.1:57001' })).toThrow(
      /^REDIS_CLUSTER_NODES: set either REDIS_URL \(one Redis server\) or REDIS_CLUSTER_NODES \(a Redis Cluster\), not both$/,
    );
  });
});

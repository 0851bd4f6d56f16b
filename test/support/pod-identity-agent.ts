// A STAND-IN for the EKS Pod Identity agent, on 127.0.0.1: on EKS it serves a pod's credentials
// at http://169.254.170.23/v1/credentials, and the Pod Identity webhook gives the pod two variables
// and no region: AWS_CONTAINER_CREDENTIALS_FULL_URI and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
// (its projected ServiceAccount token, sent as Authorization). The AWS SDK's credential chain
// takes loopback for the agent's address. It answers as the agent does, with temporary keys, and
// refuses a request without the token.
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface PodIdentityAgent {
  /** The pod's variables, as the Pod Identity webhook sets them (the agent's address aside). */
  env: Record<string, string>;
  /** Credential requests answered, and refused (no or another token). */
  served: number;
  refused: number;
  close(): Promise<void>;
}

export async function startPodIdentityAgent(dir: string): Promise<PodIdentityAgent> {
  const token = `pod-identity-token-${process.pid}`;
  const tokenFile = join(dir, 'eks-pod-identity-token');
  writeFileSync(tokenFile, token);
  const server = createServer((req, res) => {
    if (req.url !== '/v1/credentials' || req.headers.authorization !== token) {
      agent.refused++;
      res.writeHead(req.url === '/v1/credentials' ? 403 : 404, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ Code: 'AccessDeniedException', Message: 'no pod identity token' }));
    }
    agent.served++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        AccessKeyId: 'ASIAPODIDENTITY00000',
        SecretAccessKey: 'pod-identity-local-only',
        Token: 'pod-identity-session-token',
        AccountId: '123456789012',
        Expiration: new Date(Date.now() + 6 * 3600_000).toISOString(),
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const agent: PodIdentityAgent = {
    env: {
      AWS_CONTAINER_CREDENTIALS_FULL_URI: `http://127.0.0.1:${port}/v1/credentials`,
      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: tokenFile,
    },
    served: 0,
    refused: 0,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return agent;
}

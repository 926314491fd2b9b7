// Validates the fake's Entra ID face and its Foundry face's Bearer check with Microsoft's
// official identity client (@azure/identity: client secret and workload identity against
// the fake's https token endpoint, trusted through NODE_EXTRA_CA_CERTS) and Anthropic's
// Foundry SDK with an `azureADTokenProvider`, talking to the fake directly. Prints one JSON
// line. Env: FAKE_URL (http origin), ENTRA_URL (https origin), TOKEN_FILE (a service
// account token for workload identity).
import {
  ClientSecretCredential,
  WorkloadIdentityCredential,
  getBearerTokenProvider,
} from '@azure/identity';
import AnthropicFoundry from '@anthropic-ai/foundry-sdk';

const scope = 'https://cognitiveservices.azure.com/.default';
const options = { authorityHost: process.env.ENTRA_URL, disableInstanceDiscovery: true };
const ask = { model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: 'say hello' }] };

const secret = new ClientSecretCredential('tenant-1', 'client-1', 'fake-client-secret', options);
const secretToken = await secret.getToken(scope);
const workload = new WorkloadIdentityCredential({
  tenantId: 'tenant-1',
  clientId: 'client-1',
  tokenFilePath: process.env.TOKEN_FILE,
  ...options,
});
const workloadToken = await workload.getToken(scope);

const foundry = new AnthropicFoundry({
  baseURL: `${process.env.FAKE_URL}/anthropic/`,
  azureADTokenProvider: getBearerTokenProvider(secret, scope),
  maxRetries: 0,
});
const message = await foundry.messages.create(ask);
let streamText = '';
const stream = foundry.messages.stream(ask);
stream.on('text', (t) => { streamText += t; });
await stream.finalMessage();
const count = await foundry.messages.countTokens({ model: ask.model, messages: ask.messages });

// A token the fake did not issue is refused.
const bogus = new AnthropicFoundry({
  baseURL: `${process.env.FAKE_URL}/anthropic/`,
  azureADTokenProvider: async () => 'not-issued-by-entra',
  maxRetries: 0,
});
let bogusStatus = null;
try {
  await bogus.messages.create(ask);
} catch (e) {
  bogusStatus = e.status ?? String(e);
}

console.log(JSON.stringify({
  secret_token: secretToken.token,
  secret_expires_in: Math.round((secretToken.expiresOnTimestamp - Date.now()) / 1000),
  workload_token: workloadToken.token,
  json_text: message.content.map((b) => b.text ?? '').join(''),
  stream_text: streamText,
  count,
  bogus_status: bogusStatus,
}));

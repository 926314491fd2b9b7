// Validates the fake upstream's AWS Messages faces with Anthropic's own clients for them,
// talking to the fake directly (no Gatehouse in between): Bedrock Mantle through
// `AnthropicBedrockMantle` (npm @anthropic-ai/bedrock-sdk 1.2's Mantle client; SigV4 for
// `bedrock-mantle`) and Claude Platform on AWS through `AnthropicAws` (npm
// @anthropic-ai/aws-sdk; SigV4 for `aws-external-anthropic` and an API key). If an SDK
// cannot use the fake, the fake is wrong. Prints one JSON summary on stdout.
// Env: FAKE_URL (the fake's origin).
import { AnthropicBedrockMantle } from 'bedrock-sdk-mantle';
import AnthropicAws from '@anthropic-ai/aws-sdk';
import { ask, exercise } from './exercise.mjs';

const base = process.env.FAKE_URL;

// A client that must be refused: its error's status.
async function refused(client, model) {
  try {
    await client.messages.create({ model, ...ask });
    return null;
  } catch (e) {
    return e.status ?? String(e);
  }
}

const keys = { awsAccessKey: 'AKIDFAKEFAKEFAKE', awsSecretAccessKey: 'fake-secret-key' };
const out = {};
out.mantle = await exercise(
  new AnthropicBedrockMantle({ baseURL: `${base}/anthropic`, awsRegion: 'us-east-1', ...keys, maxRetries: 0 }),
  'anthropic.claude-opus-4-8',
);
out.mantle_session = await exercise(
  new AnthropicBedrockMantle({
    baseURL: `${base}/anthropic`, awsRegion: 'eu-west-1', ...keys, awsSessionToken: 'fake-session', maxRetries: 0,
  }),
  'anthropic.claude-opus-4-8',
);
out.aws_sigv4 = await exercise(
  new AnthropicAws({ baseURL: base, awsRegion: 'us-west-2', workspaceId: 'wrkspc_fake', ...keys, maxRetries: 0 }),
  'claude-opus-4-8',
);
out.aws_key = await exercise(
  new AnthropicAws({ baseURL: base, awsRegion: 'us-west-2', workspaceId: 'wrkspc_fake', apiKey: 'fake-aws-api-key', maxRetries: 0 }),
  'claude-opus-4-8',
);
// Signed for the other service: each face refuses the other's signature.
out.mantle_signed_for_aws = await refused(
  new AnthropicAws({ baseURL: `${base}/anthropic`, awsRegion: 'us-west-2', workspaceId: 'w', ...keys, maxRetries: 0 }),
  'claude-opus-4-8',
);
out.aws_signed_for_mantle = await refused(
  new AnthropicBedrockMantle({
    baseURL: base, awsRegion: 'us-east-1', ...keys, maxRetries: 0,
    defaultHeaders: { 'anthropic-workspace-id': 'wrkspc_fake' },
  }),
  'claude-opus-4-8',
);
console.log(JSON.stringify(out));

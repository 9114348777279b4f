// A producer program as a user writes it, run by local-producer.test.ts as a child process with a clean
// environment (no AWS_ENDPOINT_URL, no credentials, no profile): `node --import tsx produce-child.ts
// <url|local> <queueUrl|prefix>`. Prints one JSON line: what was sent, or the error.
const [mode, target] = process.argv.slice(2);
const job = { type: 'email.send', dedupKey: `welcome-${process.pid}`, payload: { to: 'a@b.co' } };
try {
  let sent: unknown;
  if (mode === 'url') {
    const { JobProducer } = await import('../../../shared/producer/index.ts');
    sent = await new JobProducer({ queueUrl: target ?? '' }).send(job);
  } else {
    const { localJobProducer } = await import('../../../shared/producer/index.ts');
    const producer = await localJobProducer({ prefix: target });
    sent = await producer.send(job);
  }
  process.stdout.write(`${JSON.stringify({ ok: true, sent })}\n`);
} catch (error) {
  const e = error as { name?: string; message?: string; retryable?: boolean };
  process.stdout.write(
    `${JSON.stringify({ ok: false, name: e.name, message: e.message, retryable: e.retryable })}\n`,
  );
}

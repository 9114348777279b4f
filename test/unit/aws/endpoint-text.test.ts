import { describe, expect, it } from 'vitest';
import { endpointText } from '../../../shared/aws/endpoint-text.ts';

describe('Logic: an endpoint as leaseq prints it', () => {
  it('shows a user and password as *** and leaves the rest as written', () => {
    expect(endpointText('http://ops:pw@127.0.0.1:4566')).toBe('http://***@127.0.0.1:4566');
    expect(endpointText('https://token@proxy.example.com/sqs')).toBe('https://***@proxy.example.com/sqs');
    expect(endpointText('http://127.0.0.1:4566')).toBe('http://127.0.0.1:4566');
    // An @ past the host (a path or query) is not a user.
    expect(endpointText('http://127.0.0.1:4566/a@b?x=@')).toBe('http://127.0.0.1:4566/a@b?x=@');
  });
});

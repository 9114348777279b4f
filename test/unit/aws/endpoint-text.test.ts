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

  it('hides a password with an @ in it whole: URL parsers take the last @ before the path as the end', () => {
    // new URL('http://ops:p@ss@127.0.0.1:4566') is host 127.0.0.1:4566, password 'p%40ss'.
    expect(endpointText('http://ops:p@ss@127.0.0.1:4566')).toBe('http://***@127.0.0.1:4566');
    expect(endpointText('http://ops:a\\b@ss@127.0.0.1:4566/x@y')).toBe('http://***@127.0.0.1:4566/x@y');
  });
});

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findPython, LocalStackSetupError } from '../../localstack/localstack.ts';

describe('the Python test:localstack runs LocalStack on', () => {
  it('says in one line what to install when no Python 3.13 is on PATH or under pyenv', () => {
    const env = {
      PATH: mkdtempSync(join(tmpdir(), 'no-python-')),
      PYENV_ROOT: mkdtempSync(join(tmpdir(), 'pyenv-')),
    };

    expect(() => findPython(env)).toThrow(LocalStackSetupError);
    expect(() => findPython(env)).toThrow(
      /needs Python 3\.13 .*install it \(apt-get install python3\.13, or pyenv install 3\.13\)/,
    );
  });

  it('refuses a LEASEQ_LOCALSTACK_PYTHON that is not a Python 3.13', () => {
    const env = { PATH: process.env.PATH ?? '', LEASEQ_LOCALSTACK_PYTHON: '/nonexistent/python3' };

    expect(() => findPython(env)).toThrow(
      'LEASEQ_LOCALSTACK_PYTHON=/nonexistent/python3 is not a Python that runs; LocalStack 4.14 needs Python 3.13',
    );
  });
});

// The refusal the in-memory tables answer a request DynamoDB would refuse with (its own module so the
// expression and number code can both throw it).

/** An error named like the one the SDK throws when DynamoDB refuses a request as invalid (HTTP 400). */
export function validationException(message: string): Error {
  const error = new Error(message);
  error.name = 'ValidationException';
  return error;
}

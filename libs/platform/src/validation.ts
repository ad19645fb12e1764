import { ValidationPipe, type ArgumentMetadata, type PipeTransform, type ValidationError } from '@nestjs/common';
import { ApiError } from './errors';

/**
 * class-validator on request bodies; the first failure becomes a 400 whose `param` names the
 * field the way OpenAI does (`messages[0].role`). `strict` also refuses fields the body does
 * not have.
 */
export function bodyValidation({ strict = false } = {}): ValidationPipe {
  return classValidation(strict);
}

/**
 * bodyValidation for a hot route: a body that `surelyValid` passes is taken as it is, without
 * class-validator, which costs a chat completion about a tenth of its gateway CPU (building a
 * class instance of the body and of each message, then every decorator's check). Anything else
 * (an unusual field, a null, a mistake) goes to class-validator, which decides and explains,
 * so `surelyValid` must only ever pass bodies class-validator passes (its spec proves that);
 * it need not pass them all.
 */
export function fastBodyValidation(surelyValid: (body: unknown) => boolean): PipeTransform {
  const full = classValidation(false);
  return {
    transform: (value: unknown, metadata: ArgumentMetadata) => (surelyValid(value) ? value : full.transform(value, metadata)),
  };
}

function classValidation(strict: boolean): ValidationPipe {
  return new ValidationPipe({
    transform: false,
    forbidUnknownValues: false,
    // Management bodies (issue 15.6): a field this service does not know is a typo to point out,
    // not something to ignore while the request seems to have worked.
    ...(strict ? { whitelist: true, forbidNonWhitelisted: true } : {}),
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => {
      const [param, message] = firstFailure(errors[0]);
      return ApiError.invalidRequest(message, param);
    },
  });
}

function firstFailure(error: ValidationError, path = ''): [string, string] {
  const here = /^\d+$/.test(error.property) ? `${path}[${error.property}]` : path ? `${path}.${error.property}` : error.property;
  // A wrong type explains the other failures ('lots' is also "not at least 1"), so say that first.
  const failures = Object.entries(error.constraints ?? {});
  const constraint = (failures.find(([name]) => /^is[A-Z]/.test(name)) ?? failures[0])?.[1];
  if (constraint) return [here, constraint.replace(error.property, `'${here}'`)];
  if (error.children?.length) return firstFailure(error.children[0], here);
  return [here, `'${here}' is invalid.`];
}

/**
 * For bodies parsed by hand because they nest (a nested field's error must still name it, as
 * `prompt_logging.retention_days`): `value` as a JSON object, refusing any field not in
 * `fields` when given, as management bodies do (a typo is not a setting that took). `param`
 * is where it sits; '' for the body itself.
 */
export function jsonObjectOf(value: unknown, param: string, fields?: readonly string[]): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw param ? ApiError.invalidRequest(`'${param}' must be an object.`, param) : ApiError.invalidRequest('The body must be a JSON object.');
  }
  if (fields) {
    for (const key of Object.keys(value)) {
      const at = param ? `${param}.${key}` : key;
      if (!fields.includes(key)) throw ApiError.invalidRequest(`Unknown field '${at}'; known: ${fields.join(', ')}.`, at);
    }
  }
  return value as Record<string, unknown>;
}

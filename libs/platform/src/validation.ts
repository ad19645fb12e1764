import { ValidationPipe, type ValidationError } from '@nestjs/common';
import { ApiError } from './errors';

/**
 * class-validator on request bodies; the first failure becomes a 400 whose `param` names the
 * field the way OpenAI does (`messages[0].role`). `strict` also refuses fields the body does
 * not have.
 */
export function bodyValidation({ strict = false } = {}): ValidationPipe {
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

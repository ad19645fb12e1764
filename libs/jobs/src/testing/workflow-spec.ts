import type { DomainEvent } from '@svc/eventstore';
import { DUE, type Due, type Workflow, type WorkflowOutput } from '../workflow';

/**
 * Given/when/then on a workflow's decide, as Emmett's workflow specifications:
 *   spec.given(state).when(input).then([...outputs])
 * `when()` without an input is the job falling due.
 */
export function workflowSpec<I, S, C, F, E extends DomainEvent>(workflow: Workflow<I, S, C, F, E>, now: () => Date = () => new Date('2026-11-02T10:00:00Z')) {
  return {
    given(state: S) {
      return {
        when(input: I | Due = DUE) {
          const outputs = () => workflow.decide(input, state, now());
          return {
            then(expected: WorkflowOutput<C, F>[]) {
              expect(outputs()).toEqual(expected);
            },
          };
        },
      };
    },
  };
}

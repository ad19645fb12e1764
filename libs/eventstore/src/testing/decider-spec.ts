import { DomainError, fold, type Decider, type DomainEvent } from '../decider';

/**
 * Given/when/then on events, as in Emmett's DeciderSpecification:
 *   spec.given([...events]).when(command).then([...expected events])
 *   spec.given([...events]).when(command).thenThrows('code')
 */
export function deciderSpec<C, S, E extends DomainEvent>(decider: Decider<C, S, E>, now: () => Date = () => new Date('2026-11-02T10:00:00Z')) {
  return {
    given(events: E[]) {
      return {
        when(command: C) {
          const run = () => decider.decide(command, fold(decider, events), now());
          return {
            then(expected: E[]) {
              expect(run()).toEqual(expected);
            },
            thenThrows(code: string) {
              let thrown: unknown;
              try {
                run();
              } catch (err) {
                thrown = err;
              }
              expect(thrown).toBeInstanceOf(DomainError);
              expect((thrown as DomainError).code).toBe(code);
              return thrown as DomainError;
            },
          };
        },
      };
    },
  };
}

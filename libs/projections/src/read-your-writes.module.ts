import { Module } from '@nestjs/common';
import { ReadYourWrites } from './read-your-writes';

/**
 * One ReadYourWrites per process, whichever modules import it: the positions a write remembers
 * are the ones the reads that follow wait for. Needs the process's PROJECTIONS.
 */
@Module({ providers: [ReadYourWrites], exports: [ReadYourWrites] })
export class ReadYourWritesModule {}

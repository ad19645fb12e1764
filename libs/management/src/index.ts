export { AdminService } from './admin.service';
export { KeyRequest, Omittable, RotateKeyRequest } from './key.request';
export { KeysService, type KeyOwner } from './keys.service';
export { ManagementModule } from './management.module';

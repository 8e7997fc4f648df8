from hidden_access import write_h

WRITERS = (write_h,)
